// Receives the custody service's webhooks and verifies them with the Standard Webhooks library
// (npm: standardwebhooks). Run: WEBHOOK_SECRET=whsec_… PORT=3000 node verify.js
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const secret = process.env['WEBHOOK_SECRET'] ?? '';
// Secrets the service generated are `whsec_` + base64 (the library's form). A secret you chose
// yourself in another form is used as its UTF-8 bytes: hand the library those bytes, raw.
const webhook = secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(Buffer.from(secret, 'utf8'), { format: 'raw' });

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    // Verify the body exactly as received (bytes, not re-serialized JSON).
    const body = Buffer.concat(chunks).toString('utf8');
    const headers = {
      'webhook-id': String(req.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
    };
    try {
      const event = webhook.verify(body, headers);
      // webhook-id is the same on every retry of a delivery: use it to drop duplicates.
      process.stdout.write(`${JSON.stringify({ id: headers['webhook-id'], event })}\n`);
      res.writeHead(204).end();
    } catch (err) {
      process.stderr.write(`rejected: ${String(err)}\n`);
      res.writeHead(400).end();
    }
  });
}).listen(Number(process.env['PORT'] ?? 3000), '127.0.0.1', () => process.stdout.write('listening\n'));
