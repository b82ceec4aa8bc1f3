/**
 * Numbers in schema-serialized bodies are written in plain notation (docs/architecture.md#exact-json-numbers):
 * an amount under 10^-6 is 0.00000001, as in its webhook, not the serializer's 1e-8.
 */
import Fastify from 'fastify';
import { plainNumberSerializerFactory, plainNumberTokens } from '../src/json-numbers';

test('numbers in exponent notation are rewritten digit for digit; strings and other numbers are left alone', () => {
  expect(plainNumberTokens('{"a":1e-8,"b":[5.4e-7,-1.5e-7,0.5],"c":"1e-8","d":"x\\":1e-8"}')).toBe('{"a":0.00000001,"b":[0.00000054,-0.00000015,0.5],"c":"1e-8","d":"x\\":1e-8"}');
  expect(plainNumberTokens('{"big":1e+21,"e":2E-7}')).toBe('{"big":1000000000000000000000,"e":0.0000002}');
  const plain = '{"id":"0b0b0b0e-0000-4000-8000-00000000009e","amount":0.00012345,"n":12}';
  expect(plainNumberTokens(plain)).toBe(plain);
  // Every double a serializer writes reads back as the same number.
  for (const n of [1e-8, 1.23456789e-7, 5e-324, 9.999999e-7, 1e-6, 1e21, 1.7976931348623157e308]) {
    const text = plainNumberTokens(JSON.stringify({ n }));
    expect(text).not.toMatch(/e/i);
    expect(JSON.parse(text).n).toBe(n);
  }
});

test('a Fastify app built with the serializer answers amounts in plain notation', async () => {
  const app = Fastify({ schemaController: { compilersFactory: { buildSerializer: plainNumberSerializerFactory() } } });
  app.get('/amount', { schema: { response: { 200: { type: 'object', properties: { amountReceived: { type: 'number' }, note: { type: 'string' } } } } } }, async () => ({
    amountReceived: 1e-8,
    note: '1e-8',
  }));
  try {
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    expect(await (await fetch(`${base}/amount`)).text()).toBe('{"amountReceived":0.00000001,"note":"1e-8"}');
  } finally {
    await app.close();
  }
});
