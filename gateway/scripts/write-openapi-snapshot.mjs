// `npm run openapi:snapshot`: writes the committed snapshot of the public contract and the event
// catalogue (docs/webhook-events.md, the README's table) written from it. Run it when a change to
// the REST surface is deliberate; the contract tests fail until these match.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { buildForDocument } = require('../dist/openapi-document.js');
const { eventCatalogueMarkdown, withReadmeCatalogue } = require('../dist/event-catalogue.js');
const { app, openapi } = await buildForDocument();
const document = openapi.document();
const root = path.join(import.meta.dirname, '..', '..');
const file = path.join(import.meta.dirname, '..', 'openapi.snapshot.json');
writeFileSync(file, `${JSON.stringify(document, null, 2)}\n`);
await app.close();
console.log(`wrote ${file}`);
writeFileSync(path.join(root, 'docs', 'webhook-events.md'), eventCatalogueMarkdown(document));
const readme = path.join(root, 'README.md');
writeFileSync(readme, withReadmeCatalogue(readFileSync(readme, 'utf8'), document));
console.log('wrote docs/webhook-events.md and the README event table');
