import { createServer } from 'node:http';
import { signinWork } from './signin-work.js';

/**
 * The ceiling for sign-in: a bare node:http server doing the same per-request work as an
 * existing user's sign-in (parse the body, one RS256 verification against the issuer's keys,
 * one database lookup), with nothing else: no framework, no validation, no logging.
 */
const signin = signinWork('bare_signin');

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    void (async () => {
      let key: string;
      try {
        key = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { key: string }).key;
      } catch {
        res.writeHead(400).end();
        return;
      }
      const { status, body } = await signin(key, req.headers.authorization ?? '');
      if (status === 401) res.writeHead(401).end();
      else res.writeHead(status, { 'content-type': 'application/json' }).end(body);
    })();
  });
}).listen(Number(process.env['PORT']), '127.0.0.1', () => process.stdout.write('bare server listening\n'));

// A normal exit on SIGTERM (so that --cpu-prof, when given, writes its profile).
process.on('SIGTERM', () => process.exit(0));
