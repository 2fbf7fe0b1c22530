import { AppError } from '../http/errors.js';
import type { ProjectUid } from './client.js';

/** The carry-over of an earlier release's signer documents (src/programs/carry-over.ts), as the signer client waits on it. */
export interface CarryOver {
  /** For SignerClient.holdProjectCalls: undefined when calls about `project` may go out now. */
  readonly gate: (project: ProjectUid) => Promise<void> | undefined;
  /** Resolves when nothing is left to carry (refused rows aside). */
  readonly done: Promise<void>;
  stop(): Promise<void>;
}

/** While the documents of an earlier release are carried over: nothing about a project is asked. */
export class SignerUpgradingError extends AppError {
  constructor() {
    super(
      503,
      'signer_upgrading',
      'Service Unavailable',
      "The signer's documents of an earlier release are being carried over to their projects; retry later.",
      undefined,
      { 'Retry-After': '5' },
    );
  }
}

/** A project whose documents the carry-over could not copy (logged at error): nothing about it is asked. */
export class CarryOverRefusedError extends AppError {
  constructor() {
    super(
      503,
      'carry_over_refused',
      'Service Unavailable',
      "The signer refused to carry this project's policy over from an earlier release; the operator has been alerted.",
      undefined,
      { 'Retry-After': '300' },
    );
  }
}

/** The 503s of an endpoint that asks the signer about a project, for its OpenAPI entry. */
export const PROJECT_CALL_503 =
  "signer_upgrading: after an upgrade, the signer's documents of an earlier release are being carried over; carry_over_refused: this project's could not be (the operator has been alerted).";
/** …and of one that signs: a key an earlier release made, not bound to its project yet. */
export const SIGNING_503 = `${PROJECT_CALL_503} key_unbound: the wallet's key of an earlier release is not bound to its project yet.`;
