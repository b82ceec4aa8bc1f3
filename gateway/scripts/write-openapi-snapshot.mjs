// `npm run openapi:snapshot`: writes the committed snapshot of the public contract. Run it when a
// change to the REST surface is deliberate; the contract test fails until the snapshot matches.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { buildForDocument } = require('../dist/openapi-document.js');
const { app, openapi } = await buildForDocument();
const file = path.join(import.meta.dirname, '..', 'openapi.snapshot.json');
writeFileSync(file, `${JSON.stringify(openapi.document(), null, 2)}\n`);
await app.close();
console.log(`wrote ${file}`);
