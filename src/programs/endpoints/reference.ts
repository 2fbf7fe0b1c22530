import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Type } from '@sinclair/typebox';
import { NotFoundError } from '../../platform/http/errors.js';
import { declarePlain, type Declaration } from '../../access/endpoints/declare.js';
import { buildOpenApi, type OpenApiOptions } from '../../platform/openapi/generate.js';

/** The reference page's files, served by the service itself (no CDN): swagger-ui-dist, and ours. */
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

// A script file of ours rather than inline code, so the page's CSP can say script-src 'self'.
const INIT_JS = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#reference', deepLinking: true, defaultModelsExpandDepth: 0, validatorUrl: null });
});
`;

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Custody service API reference</title>
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="reference"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/init.js"></script>
</body>
</html>
`;

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; font-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

let assetDir: string | undefined;
const assetCache = new Map<string, Buffer>();
function asset(name: string): Buffer {
  let b = assetCache.get(name);
  if (!b) {
    assetDir ??= dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
    b = readFileSync(join(assetDir, name));
    assetCache.set(name, b);
  }
  return b;
}

const Text = Type.String();

/**
 * `GET /` (where to look), `GET /openapi.json` (the document, built once from every declaration the app mounts, these
 * included) and `GET /docs` (the reference page).
 */
export function openApiEndpoints(options: OpenApiOptions, declarations: () => readonly Declaration[]): Declaration[] {
  let document: string | undefined;
  const Index = Type.Object(
    {
      service: Type.Literal('custody'),
      reference: Type.Literal('/docs'),
      openapi: Type.Literal('/openapi.json'),
    },
    { additionalProperties: false },
  );
  return [
    declarePlain(
      { method: 'GET', path: '/' },
      {
        operationId: 'getIndex',
        summary: 'Where the reference is',
        description: 'What a browser or curl pointed at the bare address sees: the paths of the reference page and of this document.',
        tag: 'Operations',
        plain: true,
        responses: {
          200: {
            description: 'The reference page and the OpenAPI document, as paths on this host.',
            schema: Index,
            example: { service: 'custody', reference: '/docs', openapi: '/openapi.json' },
          },
        },
      },
      (ctx) => {
        ctx.body = { service: 'custody', reference: '/docs', openapi: '/openapi.json' };
      },
    ),
    declarePlain(
      { method: 'GET', path: '/openapi.json' },
      {
        operationId: 'getOpenApi',
        summary: 'This OpenAPI 3.1 document',
        tag: 'Reference',
        plain: true,
        responses: {
          200: {
            description: 'The OpenAPI document, generated from the schemas the routes validate with.',
            schema: Type.Object({ openapi: Type.Literal('3.1.0') }),
          },
        },
      },
      (ctx) => {
        document ??= JSON.stringify(buildOpenApi(declarations(), options));
        ctx.type = 'application/json';
        ctx.set('Cache-Control', 'no-cache');
        ctx.body = document;
      },
    ),
    declarePlain(
      { method: 'GET', path: '/docs' },
      {
        operationId: 'getReferencePage',
        summary: 'The API reference page (HTML)',
        tag: 'Reference',
        plain: true,
        responses: {
          200: { description: 'An HTML page rendering /openapi.json; its assets are served from /docs/assets/.', schema: Text, contentType: 'text/html' },
        },
      },
      (ctx) => {
        ctx.set('Content-Security-Policy', CSP);
        ctx.type = 'text/html; charset=utf-8';
        ctx.body = PAGE;
      },
    ),
    declarePlain(
      { method: 'GET', path: '/docs/assets/:file' },
      {
        operationId: 'getReferenceAsset',
        summary: 'A file of the reference page',
        tag: 'Reference',
        plain: true,
        responses: { 200: { description: 'The file (CSS, JavaScript or an image).', schema: Text, contentType: '*/*' } },
        errors: { 404: 'not_found: no such file.' },
      },
      (ctx) => {
        const file = ctx.params['file'] ?? '';
        if (file === 'init.js') {
          ctx.type = ASSETS['swagger-ui-bundle.js'] ?? '';
          ctx.body = INIT_JS;
        } else {
          const type = Object.hasOwn(ASSETS, file) ? ASSETS[file] : undefined;
          if (type === undefined) throw new NotFoundError(`No file ${file} here.`);
          ctx.type = type;
          ctx.body = asset(file);
        }
        ctx.set('Cache-Control', 'public, max-age=3600');
      },
    ),
  ];
}
