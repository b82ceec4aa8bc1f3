/** base58check (Bitcoin's): extended keys and Tron addresses. */
import { hash } from 'node:crypto';
import { createBase58check } from '@scure/base';

// node's SHA-256 (OpenSSL) is about twice @noble/hashes' on these short inputs; same digest.
export const base58check = createBase58check((data: Uint8Array) => hash('sha256', data, 'buffer'));
