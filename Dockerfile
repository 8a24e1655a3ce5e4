# The demo service (`npm start`), as the docker-compose stack runs it.
FROM node:24.22.3-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
# The service runs the TypeScript sources through tsx: no build step, so no install scripts.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY service ./service
COPY scripts/start.mjs ./scripts/
ENV HOST=0.0.0.0 \
    PORT=9464 \
    NODE_ENV=production
EXPOSE 9464
USER node
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "fetch('http://127.0.0.1:9464/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "scripts/start.mjs"]
