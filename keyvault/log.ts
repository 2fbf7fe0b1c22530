import { pino, type DestinationStream, type Logger } from 'pino';

/** The signer's JSON logs. Nothing here ever logs a request body, a secret or a ciphertext. */
export type SignerLog = Logger;

export function createSignerLog(level: string, destination?: DestinationStream): SignerLog {
  const options = { level, base: { service: 'custody-keyvault' } };
  if (destination) return pino(options, destination);
  // Asynchronous writes: a blocking write per request line costs the signer's main thread
  // more than the key it serves. Flushed on exit.
  const stdout = pino.destination({ sync: false });
  process.on('exit', () => stdout.flushSync());
  return pino(options, stdout);
}
