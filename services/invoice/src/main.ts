import { runService } from '@coinvoice/runtime';
import { invoiceService } from './server';

runService(invoiceService);
