export * from './health';
export * from './server';
export * from './client';
export * from './tls';
export * from './proto-enum';
