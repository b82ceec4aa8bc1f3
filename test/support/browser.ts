/** Debian's Chromium driven by playwright-core (never a downloaded browser build). */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`no Chromium at ${CHROMIUM_PATH}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  }
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** A tab of its own (a fresh context: no cache, no storage) and what went wrong in it. */
export interface WatchedTab {
  context: BrowserContext;
  page: Page;
  /** Console errors, page errors, failed requests, HTTP errors, and requests to another origin. */
  problems: string[];
}

/**
 * Opens a tab that records every console error, page error, failed request and HTTP error (≥ 400),
 * and, given `origin`, every request to anywhere else.
 */
export async function openWatchedTab(browser: Browser, options: { origin?: string; timeoutMs?: number } = {}): Promise<WatchedTab> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  if (options.timeoutMs !== undefined) page.setDefaultTimeout(options.timeoutMs);
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText ?? ''}`));
  page.on('request', (r) => {
    if (options.origin !== undefined && !r.url().startsWith(options.origin)) problems.push(`third-party request: ${r.url()}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`);
  });
  return { context, page, problems };
}
