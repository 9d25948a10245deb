import type { ChildProcess } from 'node:child_process';

/** The child's next message of `type`; fails if the child exits first. */
export function reply<T>(child: ChildProcess, type: string, name: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`${name} process exited (${code})`));
    const onMessage = (message: { type: string } & Record<string, unknown>) => {
      if (message.type !== type) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(message as T);
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}
