# syntax=docker/dockerfile:1
# The custody service: one image for every role (ROLE=api | worker | keyvault | migrate).
# Runs as a non-root user with a read-only root filesystem; writable paths are volumes
# (/tmp, and KEYVAULT_DATA_DIR for the signer's local store in development only).

# Every stage uses the same base: Node.js 24 (LTS), pinned by digest (update tag and digest
# together, e.g. with Renovate). Development and CI also run the code on Node 20.19+.

# 1. Compile TypeScript with the dev dependencies.
FROM node:24.11.1-bookworm-slim@sha256:48abc13a19400ca3985071e287bd405a1d99306770eb81d61202fb6b65cf0b57 AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY contract ./contract
COPY src ./src
COPY keyvault ./keyvault
COPY migrations ./migrations
COPY console ./console
COPY scripts/build-console.ts ./scripts/
# The operator console's bundle (dist/console) is built here: the image serves it, nothing is fetched at run time.
RUN npx tsc -p tsconfig.build.json && node dist/scripts/build-console.js

# 2. Production dependencies only (no dev, no optional: the embedded PostgreSQL stays out).
FROM node:24.11.1-bookworm-slim@sha256:48abc13a19400ca3985071e287bd405a1d99306770eb81d61202fb6b65cf0b57 AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund --ignore-scripts && npm cache clean --force

# 3. The runtime: Node, the compiled code and the production modules; no package managers
#    (npm, npx, corepack, yarn), so nothing in the container can fetch and run new code.
FROM node:24.11.1-bookworm-slim@sha256:48abc13a19400ca3985071e287bd405a1d99306770eb81d61202fb6b65cf0b57
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="custody" \
      org.opencontainers.image.description="Self-hosted custody service: EVM wallets per end user, memberships, webhooks; keys under Vault transit" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="docker.io/library/node:24.11.1-bookworm-slim" \
      org.opencontainers.image.base.digest="sha256:48abc13a19400ca3985071e287bd405a1d99306770eb81d61202fb6b65cf0b57"
RUN rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
      /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-* /root/.npm
ENV NODE_ENV=production \
    DATA_DIR=/tmp/custody \
    PORT=8080
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
# A numeric user, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["node", "dist/src/programs/main.js"]
