import { pino, type DestinationStream, type Logger } from 'pino';

/** The signer's JSON logs. Nothing here ever logs a request body, a secret or a ciphertext. */
export type SignerLog = Logger;

export function createSignerLog(level: string, destination?: DestinationStream): SignerLog {
  const options = { level, base: { service: 'custody-keyvault' } };
  return destination ? pino(options, destination) : pino(options);
}
