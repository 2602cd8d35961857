// The suite of memidex's real loop (docs/realloop.md). bench/realloop/record.py runs it
// once per scheduled run, against the app it started: BASE_URL, REALLOOP_BUILD and the
// report files come from the environment.
import { defineConfig, type ReporterDescription } from '@playwright/test';

const reporter: ReporterDescription[] = [
  ['line'],
  ['json', { outputFile: process.env.REALLOOP_JSON ?? 'test-results/report.json' }],
];
if (process.env.REALLOOP_JUNIT) reporter.push(['junit', { outputFile: process.env.REALLOOP_JUNIT }]);

export default defineConfig({
  testDir: './tests',
  outputDir: './test-results',
  // One worker, in file order: the slow elements' delays are drawn from a generator seeded
  // per run, so the same seed meets the same requests in the same order.
  workers: 1,
  fullyParallel: false,
  retries: 2,
  timeout: 15_000,
  expect: { timeout: 2_500 },
  reporter,
  use: {
    baseURL: process.env.BASE_URL ?? 'http://127.0.0.1:8000',
    actionTimeout: 2_500,
    trace: 'off',
    screenshot: 'off',
    video: 'off',
    browserName: 'chromium',
    launchOptions: {
      executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
             '--disable-background-networking', '--disable-component-update',
             '--disable-sync', '--disable-dev-shm-usage'],
    },
  },
});
