import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { cpuMs, schedstatMs } from '../../bench/lib/cpu';

const onCoreMs = (pid: number) => schedstatMs(`/proc/${pid}/schedstat`, 0);
const state = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0];

/**
 * The benches' CPU per process (bench/lib/cpu.ts): a one-thread process (a PostgreSQL backend) to the nanosecond, since
 * a smoke-sized burst costs a backend less than the 10 ms clock tick of /proc/<pid>/stat on a fast core; a process of
 * several threads (Node's) in ticks of its stat, which counts its ended threads too.
 */
describe('the benches’ CPU per process', () => {
  it('reads a one-thread process to below a clock tick, as its schedstat says', async () => {
    // a shell is one thread: a little work, then it says so and waits on its stdin until let go
    const shell = spawn('sh', ['-c', 'i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; echo worked; read _'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    try {
      await once(shell.stdout, 'data');
      const pid = shell.pid!;
      // off its core, blocked in `read`: its time on a core is then all counted
      while (state(pid) !== 'S') await new Promise(setImmediate);
      const before = onCoreMs(pid);
      const read = cpuMs([pid]).get(pid)!;
      const after = onCoreMs(pid);
      expect(read).to.be.above(0);
      expect(read).to.be.within(before, after);
      // not a whole number of ticks, as the stat would have given (a tick count of zero, under 10 ms of work)
      expect(read % 10).to.not.equal(0);
    } finally {
      shell.stdin.end();
      await once(shell, 'exit');
    }
  });

  it('reads a process of several threads in whole clock ticks, and leaves out one that has ended', async () => {
    const threads = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ')[17];
    expect(Number(threads)).to.be.above(1);
    const mine = cpuMs([process.pid]).get(process.pid)!;
    expect(mine).to.be.above(0);
    expect(mine % 10).to.equal(0);

    const ended = spawn('true');
    await once(ended, 'exit');
    expect(cpuMs([ended.pid!]).has(ended.pid!)).to.equal(false);
  });
});
