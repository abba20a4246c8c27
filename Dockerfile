# Tollgate: Node 24 LTS, production dependencies only, runs as the unprivileged `node` user.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# The image already has Node 24, so the pinned `node` dev dependency is not needed here.
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:24-bookworm-slim
# A container's loopback is its own: listen on every interface so the port mapping reaches it.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    METRICS_HOST=0.0.0.0 \
    TOLLGATE_DATA_DIR=/var/lib/tollgate \
    MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY src ./src
COPY config ./config
RUN mkdir -p /var/lib/tollgate && chown node:node /var/lib/tollgate && chmod 0700 /var/lib/tollgate
# Keys, usage, sessions and the queue of the embedded store: keep them across containers.
VOLUME /var/lib/tollgate
USER node
EXPOSE 8080 9464
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# Exec form: SIGTERM reaches Node directly, which drains in-flight streams before exiting.
# --max-semi-space-size=8, --expose-gc, MALLOC_ARENA_MAX=2 and bin/tollgate's compile cache: see docs/operating.md, "Memory".
# One process, one core. On Redis (REDIS_URL, TOLLGATE_KEY_SECRET), every core of the container:
#   docker run … tollgate node --max-semi-space-size=8 --expose-gc bin/tollgate serve --workers auto
# (auto: the cores the container may use; docs/operating.md, "Every core").
CMD ["node", "--max-semi-space-size=8", "--expose-gc", "bin/tollgate", "serve"]
