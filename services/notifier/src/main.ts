import { runMigrate } from '@coinvoice/runtime/migrate-service';
import { notifierSchema } from './schema';

// `main.js migrate` loads only what migrating needs: ~60 ms instead of the ~650 the whole service
// takes to load (docs/performance.md#starting). Every other command is run.ts's.
if (process.argv[2] === 'migrate') runMigrate(notifierSchema);
else require('./run');
