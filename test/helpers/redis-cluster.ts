import os from 'node:os';
import path from 'node:path';
import { promises as fs, rmSync } from 'node:fs';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort, isListening, waitUntilListening } from '../../shared/dev/embedded/net';

/** No `redis-server` on PATH: test files skip with this message (the issue allows a skip only then). */
export class NoRedisServerError extends Error {
  constructor() {
    super(
      'no redis-server binary on PATH, so no local Redis Cluster can be started: install one ' +
        '(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) and run the tests again',
    );
    this.name = 'NoRedisServerError';
  }
}

export interface RedisClusterOptions {
  masters?: number;
  replicasPerMaster?: number;
  /** cluster-node-timeout: how long a silent master takes to be marked failing (failover follows soon after). */
  nodeTimeoutMs?: number;
  /** requirepass (and masterauth, for the replicas) on every node: clients must then authenticate. */
  password?: string;
  /** How long start, waitHealthy and restartNode wait on the cluster before they throw. */
  timeoutMs?: number;
}

export interface ClusterNodeInfo {
  readonly port: number;
  /** The cluster bus port (`cluster-port`). */
  readonly busPort: number;
  readonly id: string;
  /** Of the running process; undefined once it was killed and not restarted. */
  readonly pid: number | undefined;
  readonly alive: boolean;
  /** As the cluster sees it now (a replica promoted by a failover reads 'master'). */
  readonly role: 'master' | 'replica';
  /** For a replica: the id of its master. */
  readonly masterId: string | undefined;
}

export interface LocalRedisCluster {
  /** `127.0.0.1:port` of the masters as started: what REDIS_CLUSTER_NODES takes, comma-joined. */
  readonly nodes: readonly string[];
  /** The temporary directory holding the nodes' cluster config files; removed by stop(). */
  readonly dir: string;
  /** Every node started, live or killed, with its role as a live node reports it now. */
  all(): Promise<ClusterNodeInfo[]>;
  /** SIGKILLs a master: the `index`-th of the current masters (in port order), or the master on `port`. */
  killMaster(which: number | { port: number }): Promise<ClusterNodeInfo>;
  /**
   * SIGKILLs, at once, the master serving `key`'s slot and every replica of it: that shard's data is gone, and
   * its slots are unserved until the nodes are restarted (empty). Returns their ports.
   */
  killShardOf(key: string): Promise<number[]>;
  /** Starts a killed node again on its port and cluster config file, so that it rejoins (as a replica if failed over). */
  restartNode(port: number): Promise<void>;
  /**
   * Until every live node says cluster_state:ok and sees every live node as either a master serving slots or a
   * replica of a live master, all 16384 slots served by live masters; and every live replica's link is up.
   */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Kills every node and removes the temporary directory. */
  stop(): Promise<void>;
}

const SLOTS = 16384;
const LOG_TAIL = 4096;
const running = new Set<ChildProcess>();
const directories = new Set<string>();
let exitHookInstalled = false;

interface NodeState {
  port: number;
  busPort: number;
  id: string;
  password: string | undefined;
  child: ChildProcess | undefined;
  log: string;
}

/** startRedisCluster, or the calling hook or test skipped with the reason printed, when there is no redis-server. */
export async function startRedisClusterOrSkip(context: Mocha.Context, options?: RedisClusterOptions): Promise<LocalRedisCluster> {
  try {
    return await startRedisCluster(options);
  } catch (error) {
    if (!(error instanceof NoRedisServerError)) throw error;
    process.stdout.write(`      skipped: ${error.message}\n`);
    context.skip();
  }
}

/** A real Redis Cluster of `redis-server` processes on 127.0.0.1, slots assigned without redis-cli. */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<LocalRedisCluster> {
  const { masters = 3, replicasPerMaster = 1, nodeTimeoutMs = 1000, timeoutMs = 20_000, password } = options;
  // Redis 7 has cluster-port and CLUSTER ADDSLOTSRANGE; before it the bus is on port + 10000, slots go one by one.
  const modern = redisServerMajor() >= 7;
  installExitHook();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'redis-cluster-'));
  directories.add(dir);
  const states: NodeState[] = [];
  const masterAddresses: string[] = [];

  const spawnNode = async (state: NodeState): Promise<void> => {
    const args = [
      ...['--port', String(state.port), ...(modern ? ['--cluster-port', String(state.busPort)] : []), '--bind', '127.0.0.1'],
      ...['--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, `nodes-${state.port}.conf`)],
      ...['--cluster-node-timeout', String(nodeTimeoutMs), '--cluster-replica-validity-factor', '0'],
      ...['--dir', dir, '--save', '', '--appendonly', 'no', '--protected-mode', 'no', '--repl-diskless-sync-delay', '0'],
      ...(password === undefined ? [] : ['--requirepass', password, '--masterauth', password]),
    ];
    const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    state.child = child;
    running.add(child);
    const keep = (chunk: Buffer) => (state.log = (state.log + chunk.toString()).slice(-LOG_TAIL));
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    child.once('exit', () => running.delete(child));
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code, signal) => reject(new Error(`redis-server on ${state.port} exited (${code ?? signal}):\n${state.log}`))),
    );
    exited.catch(() => undefined);
    await Promise.race([waitUntilListening('127.0.0.1', state.port, timeoutMs), exited]);
  };

  const cluster: LocalRedisCluster = {
    nodes: masterAddresses,
    dir,
    all: () => describeNodes(states),
    killMaster: async (which) => {
      const current = (await describeNodes(states)).filter((n) => n.alive && n.role === 'master').sort((a, b) => a.port - b.port);
      const victim = typeof which === 'number' ? current[which] : current.find((n) => n.port === which.port);
      if (!victim) throw new Error(`no live master ${JSON.stringify(which)} among ${current.map((n) => n.port).join(', ')}`);
      await killNode(states.find((s) => s.port === victim.port)!);
      return { ...victim, alive: false, pid: undefined };
    },
    killShardOf: async (key) => {
      const reporter = states.find((st) => st.child)!;
      const slot = Number(await command(reporter, 'CLUSTER', 'KEYSLOT', key));
      // each entry: first slot, last slot, then the master and its replicas as [host, port, id]
      const ranges = (await command(reporter, 'CLUSTER', 'SLOTS')) as [number, number, ...[string, number, string][]][];
      const shard = ranges.find(([from, to]) => slot >= from && slot <= to);
      if (!shard) throw new Error(`no node serves slot ${slot} of ${key}`);
      // the master from the slot map, its replicas from CLUSTER NODES (CLUSTER SLOTS leaves out a replica that
      // has not yet acknowledged any replication)
      const [, masterPort, masterId] = shard[2] as [string, number, string];
      const replicas = (await describeNodes(states)).filter((n) => n.alive && n.role === 'replica' && n.masterId === masterId);
      const ports = [Number(masterPort), ...replicas.map((n) => n.port)];
      await Promise.all(ports.map((port) => killNode(states.find((st) => st.port === port)!)));
      return ports;
    },
    restartNode: async (port) => {
      const state = states.find((s) => s.port === port);
      if (!state) throw new Error(`no node on ${port} in this cluster`);
      if (state.child) throw new Error(`the node on ${port} is still running`);
      await spawnNode(state);
    },
    waitHealthy: (ms = timeoutMs) =>
      waitFor(`a healthy cluster on ${states.map((s) => s.port).join(',')}`, ms, () => healthProblem(states)),
    stop: async () => {
      await Promise.all(states.map(killNode));
      await fs.rm(dir, { recursive: true, force: true });
      directories.delete(dir);
    },
  };

  try {
    const count = masters * (1 + replicasPerMaster);
    for (let i = 0; i < count; i++) {
      const state: NodeState = { port: 0, busPort: 0, id: '', password, child: undefined, log: '' };
      // A free port can be taken between our probe and redis-server's bind: pick again then.
      for (let attempt = 1; ; attempt++) {
        [state.port, state.busPort] = await freePorts(modern);
        try {
          await spawnNode(state);
          break;
        } catch (error) {
          await killNode(state);
          if (attempt >= 3 || !/already in use/i.test(state.log)) throw error;
          state.log = '';
        }
      }
      state.id = String(await command(state, 'CLUSTER', 'MYID'));
      states.push(state);
    }
    await assignSlots(states, masters, modern, timeoutMs);
    await cluster.waitHealthy();
    masterAddresses.push(...states.slice(0, masters).map((s) => `127.0.0.1:${s.port}`));
    return cluster;
  } catch (error) {
    await cluster.stop();
    throw error;
  }
}

async function assignSlots(states: NodeState[], masters: number, modern: boolean, timeoutMs: number): Promise<void> {
  // Distinct config epochs up front, as redis-cli does, so that no epoch collision has to be resolved.
  for (const [i, s] of states.entries()) await command(s, 'CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1));
  const [first, ...others] = states;
  for (const s of others) await command(first!, 'CLUSTER', 'MEET', '127.0.0.1', String(s.port), ...(modern ? [String(s.busPort)] : []));
  await waitFor('every node to know every other', timeoutMs, async () => {
    for (const s of states) {
      const lines = parseNodes(String(await command(s, 'CLUSTER', 'NODES')));
      if (lines.length < states.length || lines.some((l) => l.flags.some((f) => f === 'handshake' || f === 'noaddr'))) {
        return `${s.port} knows ${lines.length}/${states.length} nodes`;
      }
    }
    return undefined;
  });
  for (let m = 0; m < masters; m++) {
    const from = Math.floor((m * SLOTS) / masters);
    const to = Math.floor(((m + 1) * SLOTS) / masters) - 1;
    if (modern) await command(states[m]!, 'CLUSTER', 'ADDSLOTSRANGE', String(from), String(to));
    else for (let s = from; s <= to; s += 1000) await command(states[m]!, 'CLUSTER', 'ADDSLOTS', ...range(s, Math.min(s + 999, to)));
  }
  for (let r = masters; r < states.length; r++) {
    const master = states[(r - masters) % masters]!;
    // The replica must have learnt through gossip that its master is one before it accepts REPLICATE.
    await waitFor(`${states[r]!.port} to replicate ${master.port}`, timeoutMs, async () => {
      try {
        await command(states[r]!, 'CLUSTER', 'REPLICATE', master.id);
        return undefined;
      } catch (error) {
        return (error as Error).message;
      }
    });
  }
}

/** undefined when healthy, else what is not yet so. */
async function healthProblem(states: NodeState[]): Promise<string | undefined> {
  const live = states.filter((s) => s.child);
  const liveIds = new Set(live.map((s) => s.id));
  for (const s of live) {
    const { exitCode, signalCode } = s.child!;
    if (exitCode !== null || signalCode !== null) return `the node on ${s.port} exited by itself (${exitCode ?? signalCode}):\n${s.log}`;
  }
  for (const s of live) {
    const info = String(await command(s, 'CLUSTER', 'INFO'));
    if (!/cluster_state:ok/.test(info)) return `${s.port}: ${info.match(/cluster_state:\w+/)?.[0]}`;
    if (!info.includes(`cluster_slots_ok:${SLOTS}`)) return `${s.port}: ${info.match(/cluster_slots_ok:\d+/)?.[0]}`;
    const lines = parseNodes(String(await command(s, 'CLUSTER', 'NODES')));
    const known = lines.filter((l) => liveIds.has(l.id)).length;
    if (known !== liveIds.size) return `${s.port} knows ${known} of the ${liveIds.size} live nodes`;
    let served = 0;
    for (const l of lines) {
      const failing = l.flags.some((f) => f === 'fail' || f === 'fail?');
      if (liveIds.has(l.id) && failing) return `${s.port} sees live ${l.id.slice(0, 8)} as ${l.flags.join(',')}`;
      // Every node here either serves slots or replicates a live master: a master without slots is one that came
      // back and has not yet learnt that its slots moved on (it turns replica when it does).
      if (liveIds.has(l.id) && l.flags.includes('master') && l.slots === 0)
        return `${s.port} sees ${l.id.slice(0, 8)} as a master without slots`;
      if (liveIds.has(l.id) && l.flags.includes('slave') && !liveIds.has(l.masterId ?? ''))
        return `${s.port} sees ${l.id.slice(0, 8)} replicate a dead master`;
      if (l.slots === 0) continue;
      if (!liveIds.has(l.id) || failing || !l.flags.includes('master'))
        return `${s.port} sees slots on ${l.id.slice(0, 8)} (${l.flags.join(',')})`;
      served += l.slots;
    }
    if (served !== SLOTS) return `${s.port} sees ${served} slots served`;
    const me = lines.find((l) => l.flags.includes('myself'));
    if (me?.flags.includes('slave')) {
      const replication = String(await command(s, 'INFO', 'replication'));
      if (!/master_link_status:up/.test(replication)) return `${s.port}: replica link down`;
    }
  }
  return undefined;
}

async function describeNodes(states: NodeState[]): Promise<ClusterNodeInfo[]> {
  const reporter = states.find((s) => s.child);
  const lines = reporter ? parseNodes(String(await command(reporter, 'CLUSTER', 'NODES'))) : [];
  return states.map((s) => {
    const line = lines.find((l) => l.id === s.id);
    const replica = line?.flags.includes('slave') ?? false;
    return {
      port: s.port,
      busPort: s.busPort,
      id: s.id,
      pid: s.child?.pid,
      alive: s.child !== undefined,
      role: replica ? 'replica' : 'master',
      masterId: replica ? line?.masterId : undefined,
    };
  });
}

interface NodesLine {
  id: string;
  flags: string[];
  masterId: string | undefined;
  slots: number;
}

function parseNodes(text: string): NodesLine[] {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => {
      const [id = '', , flags = '', master = '-', , , , , ...slotFields] = l.trim().split(' ');
      let slots = 0;
      for (const field of slotFields) {
        if (field.startsWith('[')) continue; // a slot being migrated or imported
        const [from, to = from] = field.split('-').map(Number);
        slots += to! - from! + 1;
      }
      return { id, flags: flags.split(','), masterId: master === '-' ? undefined : master, slots };
    });
}

/** One command on a fresh connection to one node (no cluster redirection; no retry). */
async function command(node: NodeState, name: string, ...args: string[]): Promise<unknown> {
  const client = new Redis({
    host: '127.0.0.1',
    port: node.port,
    password: node.password,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await client.call(name, ...args);
  } finally {
    client.disconnect();
  }
}

async function waitFor(what: string, timeoutMs: number, problem: () => Promise<string | undefined>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: string | undefined = 'not checked';
  while (Date.now() < deadline) {
    try {
      last = await problem();
    } catch (error) {
      last = (error as Error).message;
    }
    if (last === undefined) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}: ${last}`);
}

/** A port for the node and one for its cluster bus (port + 10000 before Redis 7, so the port must leave room). */
async function freePorts(modern: boolean): Promise<[number, number]> {
  if (modern) return [await freePort(), await freePort()];
  for (;;) {
    const port = await freePort();
    if (port + 10000 < 65536 && !(await isListening('127.0.0.1', port + 10000))) return [port, port + 10000];
  }
}

function range(from: number, to: number): string[] {
  return Array.from({ length: to - from + 1 }, (_, i) => String(from + i));
}

function killNode(state: NodeState): Promise<void> {
  const child = state.child;
  state.child = undefined;
  if (!child) return Promise.resolve();
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

function redisServerMajor(): number {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error) throw new NoRedisServerError();
  const version = /v=(\d+)\./.exec(probe.stdout)?.[1];
  return version ? Number(version) : 0;
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // mocha --exit (or a crash) ends the process without after-hooks: no redis-server may outlive it. (Ctrl-C
  // reaches the children through the terminal's process group.)
  process.on('exit', () => {
    for (const child of running) child.kill('SIGKILL');
    for (const dir of directories) rmSync(dir, { recursive: true, force: true });
  });
}
