import { runService } from '@coinvoice/runtime';
import { notifierService } from './server';

runService(notifierService);
