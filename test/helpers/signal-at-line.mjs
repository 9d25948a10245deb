// Preloaded into a spawned process (NODE_OPTIONS=--import): sends the process SIGTERM the instant it hands
// stdout a line containing SIGNAL_AT_LINE, before any of its code after that write runs, as a platform that
// reads the line and signals at once may. Tests use it to show that a process announcing itself ready already
// handles the signal. pino writes stdout through fs.write (sonic-boom, asynchronous) or fs.writeSync.
import fs from 'node:fs';
const marker = process.env.SIGNAL_AT_LINE;
let sent = false;
for (const name of ['write', 'writeSync']) {
  const original = fs[name];
  fs[name] = function (fd, data, ...rest) {
    if (!sent && marker && fd === 1 && String(data).includes(marker)) {
      sent = true;
      process.kill(process.pid, 'SIGTERM');
    }
    return original.call(this, fd, data, ...rest);
  };
}
