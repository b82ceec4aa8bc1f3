import { runService } from '@coinvoice/runtime';
import { authService } from './server';

runService(authService);
