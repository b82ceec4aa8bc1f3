/**
 * A 3-node NATS JetStream cluster of the test's own: three Debian nats-server processes on free
 * local ports, joined by cluster routes, each with its own store folder. `kill(name)` SIGKILLs one
 * node (a crash: no goodbye to clients or peers); the two left keep a quorum for R3 streams.
 * `destroy()` (afterAll) kills every node and removes the folders; a watchdog kills them should
 * the test process die first (see own-infra.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { portAnswers } from './infra';
import { NATS_SERVER_BIN, stopProcess, track } from './own-infra';
import { freePortForTest } from './ports';

export interface ClusterNode {
  name: string;
  clientPort: number;
  routePort: number;
  storeDir: string;
  child?: ChildProcess;
  log: string;
}

export class NatsCluster {
  private constructor(
    readonly nodes: ClusterNode[],
    private readonly root: string,
  ) {}

  /** Every node's client URL, comma-separated (NATS_URL accepts the list). */
  get url(): string {
    return this.nodes.map((node) => `nats://127.0.0.1:${node.clientPort}`).join(',');
  }

  output(): string {
    return this.nodes.map((node) => `--- ${node.name}\n${node.log.slice(-4000)}`).join('\n');
  }

  static async start(size = 3, timeoutMs = 30_000): Promise<NatsCluster> {
    if (!NATS_SERVER_BIN) throw new Error('nats-server is not installed (Debian: apt-get install nats-server)');
    const root = mkdtempSync(path.join(tmpdir(), 'cv-nats-cluster-'));
    const nodes: ClusterNode[] = [];
    for (let i = 1; i <= size; i++) {
      nodes.push({ name: `n${i}`, clientPort: await freePortForTest(), routePort: await freePortForTest(), storeDir: path.join(root, `n${i}`), log: '' });
    }
    const cluster = new NatsCluster(nodes, root);
    try {
      for (const node of nodes) cluster.spawn(node);
      await cluster.waitForJetStream(timeoutMs);
    } catch (err) {
      await cluster.destroy();
      throw err;
    }
    return cluster;
  }

  private spawn(node: ClusterNode): void {
    const routes = this.nodes.filter((other) => other !== node).map((other) => `nats://127.0.0.1:${other.routePort}`);
    const child = spawn(
      NATS_SERVER_BIN as string,
      [
        '-js', '-sd', node.storeDir,
        '-n', node.name,
        '-a', '127.0.0.1', '-p', String(node.clientPort),
        '--cluster_name', 'cv-test',
        '--cluster', `nats://127.0.0.1:${node.routePort}`,
        '--routes', routes.join(','),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    track(child, 'SIGKILL');
    const onData = (chunk: Buffer) => (node.log = (node.log + chunk.toString()).slice(-65_536));
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    node.child = child;
  }

  /** Resolves once every node answers and JetStream (its meta leader elected) takes API requests. */
  private async waitForJetStream(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (const node of this.nodes) {
      while (!(await portAnswers('127.0.0.1', node.clientPort, 300))) {
        if (node.child?.exitCode !== null) throw new Error(`nats-server ${node.name} exited while starting:\n${node.log}`);
        if (Date.now() > deadline) throw new Error(`nats-server ${node.name} did not answer:\n${this.output()}`);
        await sleep(50);
      }
    }
    const nc = await this.connect();
    try {
      const jsm = await nc.jetstreamManager({ checkAPI: false });
      for (;;) {
        try {
          await jsm.getAccountInfo();
          return;
        } catch (err) {
          if (Date.now() > deadline) throw new Error(`JetStream cluster not ready: ${String(err)}\n${this.output()}`);
          await sleep(200);
        }
      }
    } finally {
      await nc.close();
    }
  }

  connect(): Promise<NatsConnection> {
    return connect({ servers: this.url.split(','), maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  }

  node(name: string): ClusterNode {
    const node = this.nodes.find((n) => n.name === name);
    if (!node) throw new Error(`no node ${name}`);
    return node;
  }

  /** SIGKILLs one node. */
  async kill(name: string): Promise<void> {
    const node = this.node(name);
    if (node.child) await stopProcess(node.child, 'SIGKILL', 5_000);
    node.child = undefined;
  }

  async destroy(): Promise<void> {
    await Promise.all(this.nodes.map((node) => (node.child ? stopProcess(node.child, 'SIGKILL', 5_000) : undefined)));
    rmSync(this.root, { recursive: true, force: true });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
