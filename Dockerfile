# syntax=docker/dockerfile:1
# The custody service: one image for every role (ROLE=api | worker | keyvault | migrate).
# Runs as a non-root user with a read-only root filesystem; writable paths are volumes
# (/tmp, and KEYVAULT_DATA_DIR for the signer's local store in development only).

# The base is pinned to an exact Node.js release (the one CI tests with); every stage uses it.

# 1. Compile TypeScript with the dev dependencies.
FROM node:20.20.2-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY keyvault ./keyvault
COPY migrations ./migrations
RUN npx tsc -p tsconfig.build.json

# 2. Production dependencies only (no dev, no optional: the embedded PostgreSQL stays out).
FROM node:20.20.2-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund --ignore-scripts && npm cache clean --force

# 3. The runtime: compiled code, production modules, nothing else.
FROM node:20.20.2-bookworm-slim
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
ENTRYPOINT ["node", "dist/src/main.js"]
