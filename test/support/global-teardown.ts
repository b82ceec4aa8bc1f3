type Stoppable = { stop(): Promise<unknown> };

export default async function globalTeardown(): Promise<void> {
  const started = (globalThis as { __coinvoiceContainers?: Stoppable[] }).__coinvoiceContainers ?? [];
  await Promise.all(started.map((c) => c.stop()));
}
