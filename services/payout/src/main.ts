import { runService } from '@coinvoice/runtime';
import { payoutService } from './server';

runService(payoutService);
