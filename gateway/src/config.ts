import { commonSettings, setting, SERVICE_PORTS } from '@coinvoice/runtime';

const backend = (port: number) => setting.url(['http:', 'https:'], { devDefault: `http://127.0.0.1:${port}` });

export const gatewaySettings = {
  APP_ENV: commonSettings.APP_ENV,
  GATEWAY_PORT: setting.port(8080),
  GATEWAY_HOST: setting.string({ default: '0.0.0.0', expected: 'an interface address to listen on' }),
  AUTH_URL: backend(SERVICE_PORTS.auth.grpc),
  INVOICE_URL: backend(SERVICE_PORTS.invoice.grpc),
  PAYOUT_URL: backend(SERVICE_PORTS.payout.grpc),
  NOTIFIER_URL: backend(SERVICE_PORTS.notifier.grpc),
  NATS_URL: commonSettings.NATS_URL,
  EVENT_NAMESPACE: commonSettings.EVENT_NAMESPACE,
  BODY_LIMIT_BYTES: setting.int({ default: 64 * 1024, min: 1024, max: 10 * 1024 * 1024 }),
  API_KEY_CACHE_TTL_MS: setting.int({ default: 30_000, min: 0, max: 3_600_000 }),
  LOG_LEVEL: commonSettings.LOG_LEVEL,
};
