/**
 * What the logger hides: a one-time code, password, token, key or secret logged by name; never an
 * error's code (errno, SQLSTATE, a NATS code), which an operator reads an outage by — every one
 * showed `[redacted]` (an outside review counted 95 after an outage).
 */
import { Writable } from 'node:stream';
import { createLogger } from '../src/log';

function logged(write: (logger: ReturnType<typeof createLogger>) => void): Record<string, unknown> {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  write(createLogger({ service: 'test', destination }));
  return JSON.parse(lines[0]!) as Record<string, unknown>;
}

test("an error's code is shown; a code, password or token logged by name is not", () => {
  const err = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
  const line = logged((logger) => logger.warn({ err, code: '123456', password: 'hunter2', body: { code: '654321' }, session: { token: 't' } }, 'x'));
  expect(line.err).toMatchObject({ message: 'read ECONNRESET', code: 'ECONNRESET' });
  expect(line.code).toBe('[redacted]');
  expect(line.password).toBe('[redacted]');
  expect(line.body).toEqual({ code: '[redacted]' });
  expect(line.session).toEqual({ token: '[redacted]' });
  const postgres = logged((logger) => logger.error({ err: Object.assign(new Error('duplicate key'), { code: '23505' }) }, 'y'));
  expect(postgres.err).toMatchObject({ code: '23505' });
});
