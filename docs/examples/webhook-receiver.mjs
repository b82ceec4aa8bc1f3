// A webhook receiver to run while following the README: verifies each delivery with the stock
// `standardwebhooks` package (a dependency of this repository) and prints it.
//
//   COINVOICE_WEBHOOK_SECRET=whsec_… PORT=9000 node docs/examples/webhook-receiver.mjs
//
// Answers 204 to a verified delivery, 400 to anything else (forged, altered, stale, unsigned).
// Node's own http server, no framework: the integration guide shows the same with Express.
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const secret = process.env.COINVOICE_WEBHOOK_SECRET ?? '';
if (!secret.startsWith('whsec_')) {
  console.error('set COINVOICE_WEBHOOK_SECRET to the project’s webhookSecret (whsec_…), shown when the project was created');
  process.exit(2);
}
const wh = new Webhook(secret);
const port = Number(process.env.PORT ?? 9000);

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const type = req.headers['webhook-event-type'];
    try {
      // The raw body, before any JSON parsing: the signature covers its exact bytes.
      const event = wh.verify(body, req.headers);
      console.log(`verified ${type} [${req.headers['webhook-id']}] ${JSON.stringify(event)}`);
      res.writeHead(204).end();
    } catch (err) {
      console.log(`REFUSED ${type ?? '(no type)'} [${req.headers['webhook-id'] ?? '-'}]: ${err instanceof Error ? err.message : String(err)}`);
      res.writeHead(400).end();
    }
  });
});

server.listen(port, '127.0.0.1', () => console.log(`receiving webhooks on http://127.0.0.1:${server.address().port}/ (any path)`));
