/**
 * A process's events side (docs/architecture.md#starting-while-nats-is-down): NATS unreachable at
 * start is waited for in the background; any other failure stops the start. The connection here
 * is a stand-in (what EventsSide calls on it); test/resilience/nats-outage.test.ts runs the whole
 * system against a real NATS that is down.
 */
import { createServer, type AddressInfo, type Socket } from 'node:net';
import type { NatsConnection } from 'nats';
import { connectNats } from '../src/events/bus';
import { EventsSide, isNatsUnreachable } from '../src/events/events-side';
import { createLogger } from '../src/log';
import type { Worker } from '../src/worker';

const logger = createLogger({ service: 'events-side-test', level: 'silent' });

function unreachable(): Error {
  return Object.assign(new Error('CONNECTION_REFUSED'), { code: 'CONNECTION_REFUSED' });
}

const unexpectedRefusal = (err: unknown) => {
  throw new Error(`onRefused called unexpectedly: ${String(err)}`);
};

/** An events side retrying every 10 ms, for which a refusal is a test failure unless `onRefused` is given. */
function fastSide(options: Partial<ConstructorParameters<typeof EventsSide>[0]> & Pick<ConstructorParameters<typeof EventsSide>[0], 'connect' | 'setUp'>): EventsSide {
  return new EventsSide({ logger, onRefused: unexpectedRefusal, retryMs: 10, ...options });
}

function standInConnection(): NatsConnection & { drained: boolean } {
  const connection = {
    drained: false,
    isClosed: () => false,
    flush: () => Promise.resolve(),
    close: () => Promise.resolve(),
    drain() {
      connection.drained = true;
      return Promise.resolve();
    },
  };
  return connection as unknown as NatsConnection & { drained: boolean };
}

function recordingWorker(log: string[], name: string): Worker {
  return {
    start: () => void log.push(`start ${name}`),
    stop: async () => void log.push(`stop ${name}`),
  };
}

async function until(what: string, probe: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('EventsSide', () => {
  it('set up at once when NATS answers at start', async () => {
    const log: string[] = [];
    const side = new EventsSide({ logger, onRefused: unexpectedRefusal, connect: async () => standInConnection(), setUp: async () => [recordingWorker(log, 'relay'), recordingWorker(log, 'consumer')] });
    await side.start();
    expect(log).toEqual(['start relay', 'start consumer']);
    await expect(side.ping()).resolves.toBeUndefined();
    await side.stop();
    expect(log.slice(2).sort()).toEqual(['stop consumer', 'stop relay']);
  });

  it('NATS unreachable at start: starts without it, says so, and sets up once NATS answers', async () => {
    const log: string[] = [];
    let answering = false;
    let attempts = 0;
    let toldUnreachable = 0;
    const connection = standInConnection();
    const side = fastSide({
      connect: async () => {
        attempts++;
        if (!answering) throw unreachable();
        return connection;
      },
      setUp: async () => [recordingWorker(log, 'relay')],
      onUnreachableAtStart: () => toldUnreachable++,
    });
    await side.start();
    expect(toldUnreachable).toBe(1);
    expect(log).toEqual([]);
    await expect(side.ping()).rejects.toThrow('nats: not set up since the process started: CONNECTION_REFUSED');
    await until('a few more attempts', () => attempts >= 3);
    expect(log).toEqual([]);
    answering = true;
    await until('the relay started', () => log.length > 0);
    expect(log).toEqual(['start relay']);
    await expect(side.ping()).resolves.toBeUndefined();
    expect(toldUnreachable).toBe(1);
    await side.stop();
    expect(log).toEqual(['start relay', 'stop relay']);
    expect(connection.drained).toBe(true);
  });

  it('any other failure at start stops the start (credentials, permissions), and closes what it opened', async () => {
    const log: string[] = [];
    const refused = new EventsSide({
      logger,
      onRefused: unexpectedRefusal,
      connect: async () => {
        throw Object.assign(new Error('Authorization Violation'), { code: 'AUTHORIZATION_VIOLATION' });
      },
      setUp: async () => [recordingWorker(log, 'relay')],
    });
    await expect(refused.start()).rejects.toThrow('Authorization Violation');
    let closed = false;
    const connection = Object.assign(standInConnection(), {
      close: () => {
        closed = true;
        return Promise.resolve();
      },
    });
    const failingSetUp = new EventsSide({
      logger,
      onRefused: unexpectedRefusal,
      connect: async () => connection,
      setUp: async () => [recordingWorker(log, 'relay'), { start: () => Promise.reject(new Error('stream: permission denied')), stop: async () => undefined }],
    });
    await expect(failingSetUp.start()).rejects.toThrow('permission denied');
    // The worker started before the failure was stopped again, the connection closed.
    expect(log).toEqual(['start relay', 'stop relay']);
    expect(closed).toBe(true);
  });

  it('stops while still waiting for NATS: no attempt after the stop', async () => {
    let attempts = 0;
    const side = fastSide({
      connect: async () => {
        attempts++;
        throw unreachable();
      },
      setUp: async () => [],
    });
    await side.start();
    await until('an attempt in the background', () => attempts >= 2);
    await side.stop();
    const after = attempts;
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(attempts).toBe(after);
  });

  it('NATS refusing us after a start without it (credentials): onRefused, no more attempts', async () => {
    let attempts = 0;
    const refusals: unknown[] = [];
    const side = fastSide({
      connect: async () => {
        attempts++;
        if (attempts < 3) throw unreachable();
        throw Object.assign(new Error('Authorization Violation'), { code: 'AUTHORIZATION_VIOLATION' });
      },
      setUp: async () => [],
      onRefused: (err) => refusals.push(err),
    });
    await side.start();
    await until('the refusal', () => refusals.length > 0);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(attempts).toBe(3);
    expect(refusals).toEqual([expect.objectContaining({ code: 'AUTHORIZATION_VIOLATION' })]);
    await expect(side.ping()).rejects.toThrow('Authorization Violation');
    await side.stop();
  });

  it('a set-up that fails once NATS answers after the start is tried again, its error in the health check meanwhile', async () => {
    const log: string[] = [];
    let connects = 0;
    let setUps = 0;
    let jetStreamReady = false;
    const side = fastSide({
      connect: async () => {
        connects++;
        if (connects === 1) throw unreachable();
        return standInConnection();
      },
      setUp: async () => {
        setUps++;
        if (!jetStreamReady) throw new Error('jetstream not enabled yet');
        return [recordingWorker(log, 'relay')];
      },
    });
    await side.start();
    await until('failed set-ups', () => setUps >= 2);
    await expect(side.ping()).rejects.toThrow('jetstream not enabled yet');
    expect(log).toEqual([]);
    jetStreamReady = true;
    await until('the relay started', () => log.length > 0);
    await expect(side.ping()).resolves.toBeUndefined();
    await side.stop();
  });

  it('a NATS_URL whose port accepts and never answers fails an attempt within its connect timeout, as not answering', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const started = Date.now();
      const failure = await connectNats({ url: `nats://127.0.0.1:${(silent.address() as AddressInfo).port}`, name: 'silent-test', connectTimeoutMs: 300 }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(isNatsUnreachable(failure)).toBe(true);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('tells a server that did not answer from one that refused', () => {
    for (const code of ['CONNECTION_REFUSED', 'CONNECTION_TIMEOUT', 'TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN']) expect([code, isNatsUnreachable({ code })]).toEqual([code, true]);
    for (const code of ['AUTHORIZATION_VIOLATION', 'PERMISSIONS_VIOLATION', 'BAD_AUTHENTICATION', '503', undefined]) expect([code, isNatsUnreachable({ code })]).toEqual([code, false]);
    expect(isNatsUnreachable(new Error('no code'))).toBe(false);
  });
});
