/** The wallet webhook secret is bound to its project row, so a ciphertext moved elsewhere does not open. */
export const walletSecretAad = (projectId: number): string => `project:${projectId}:wallet-webhook-secret`;

/** A subscription secret is bound to its row, so a ciphertext moved elsewhere does not open. */
export const subscriptionSecretAad = (id: number): string => `webhook-subscription:${id}:secret`;
