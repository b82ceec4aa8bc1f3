/**
 * Response bodies write every number in plain notation (docs/architecture.md#exact-json-numbers).
 * The schema serializer writes a double with `'' + n`, which for amounts under 10^-6 is exponent
 * notation ("amountReceived":1e-8) where the webhooks and balances, written as exact text, say
 * 0.00000001: the same value, but not the same token, and a client matching amounts as text (or a
 * decimal parser reading "1e-8") should not meet two forms of one amount.
 */
import { decimalAsJsonNumber } from '@coinvoice/domain/json-money';
import { SerializerSelector, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';

/** A number token in exponent notation where a value starts (no whitespace in serializer output). */
const EXPONENT_NUMBER = /[:,[]-?\d+(?:\.\d+)?[eE][-+]?\d/;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;
const isNumberStart = (c: number) => c === MINUS || (c >= 0x30 && c <= 0x39);
const isNumberChar = (c: number) => isNumberStart(c) || c === 0x2e /* . */ || c === 0x65 /* e */ || c === 0x45 /* E */ || c === 0x2b; /* + */

/**
 * `json` (compact JSON text) with each number in exponent notation rewritten in plain notation,
 * the same value digit for digit; strings are left alone. Returns `json` itself when it has none.
 */
export function plainNumberTokens(json: string): string {
  if (!EXPONENT_NUMBER.test(json)) return json;
  let out = '';
  let copiedUpTo = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
      continue;
    }
    if (c === QUOTE) {
      inString = true;
      continue;
    }
    if (!isNumberStart(c)) continue;
    let end = i + 1;
    while (end < json.length && isNumberChar(json.charCodeAt(end))) end++;
    const token = json.slice(i, end);
    if (token.includes('e') || token.includes('E')) {
      out += json.slice(copiedUpTo, i) + decimalAsJsonNumber(token);
      copiedUpTo = end;
    }
    i = end - 1;
  }
  return copiedUpTo === 0 ? json : out + json.slice(copiedUpTo);
}

/** Fastify's own schema serializer (fast-json-stringify), its output passed through `plainNumberTokens`. */
export function plainNumberSerializerFactory(): SerializerFactory {
  const schemaSerializers = SerializerSelector();
  return (externalSchemas, options) => {
    const compile = schemaSerializers(externalSchemas, options);
    return (route) => {
      const serialize = compile(route);
      return (value) => plainNumberTokens(serialize(value));
    };
  };
}
