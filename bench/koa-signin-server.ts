import Router from '@koa/router';
import Koa from 'koa';
import { koaBody } from 'koa-body';
import { signinWork } from './signin-work.js';

/**
 * The bare server's work (signin-work.ts) behind the service's framework and nothing else: Koa,
 * one @koa/router route, koa-body's JSON parser. What the framework alone costs, beside the bare
 * server and the service in the same run (context for the sign-in ratio, not a goal).
 */
const signin = signinWork('koa_signin');
const app = new Koa();
const router = new Router();
router.post('/api/v1/signin', async (ctx) => {
  const { status, body } = await signin((ctx.request.body as { key: string }).key, ctx.get('Authorization'));
  ctx.status = status;
  if (status !== 401) {
    ctx.type = 'application/json';
    ctx.body = body;
  }
});
app.use(koaBody({ json: true, jsonStrict: true, multipart: false, urlencoded: false, text: false }));
app.use(router.routes());
app.listen(Number(process.env['PORT']), '127.0.0.1', () => process.stdout.write('koa server listening\n'));

process.on('SIGTERM', () => process.exit(0));
