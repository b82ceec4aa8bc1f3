/**
 * `npm start`'s launcher starts a crashed process again, but not forever: one that dies more than
 * five times in a minute stops the whole system, saying which and where its log is, and the
 * launcher exits 1. It said "giving up; starting it again" and stayed up without its gateway
 * (outside reviews).
 */
import { bootSystem, isAlive, type BootedSystem } from '../support/system';

let system: BootedSystem;

beforeAll(async () => {
  system = await bootSystem();
}, 90_000);

afterAll(async () => {
  await system?.stop();
});

test('a gateway killed six times in a minute stops the system: the launcher says so and exits 1', async () => {
  const exited = new Promise<number | null>((resolve) => system.launcher.once('exit', (code) => resolve(code)));
  let killed = 0;
  while (system.launcher.exitCode === null && killed < 10) {
    const pid = system.current().gateway!.pid;
    if (pid !== 0 && isAlive(pid)) {
      process.kill(pid, 'SIGKILL');
      killed++;
      // Until the launcher has started another (or given up).
      const deadline = Date.now() + 10_000;
      while (system.launcher.exitCode === null && system.current().gateway!.pid === pid && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    } else {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  expect(await exited).toBe(1);
  expect(killed).toBe(6);
  expect(system.output()).toMatch(/gateway keeps dying \(SIGKILL, 6 times in a minute\); see \S+gateway\.log: not started again; stopping coinvoice/);
  expect(system.output()).not.toMatch(/giving up\); starting it again/);
}, 90_000);
