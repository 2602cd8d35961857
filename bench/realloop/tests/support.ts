// What every spec shares: the build under test, the app's texts, and the two annotations
// memidex reads (docs/import.md): `memidex-verified` after a check held, `memidex-anchor`
// for what a test depends on that no locator names.
import { test } from '@playwright/test';

/** The build the suite runs against (record.py sets REALLOOP_BUILD). */
export const build = Number(process.env.REALLOOP_BUILD ?? '1');

/** The suite follows the app's intended changes the way a team changes its tests in the
 * pull request that changes the app: `since(2, 'Log in', 'Sign in')`. Build 3's bugs
 * are not followed: the tests expect what is right, and fail. */
export function since<T>(n: number, now: T, before: T): T {
  return build >= n ? now : before;
}

export const SIGN_IN = since(2, 'Log in', 'Sign in');
export const ROOMS = since(4, '/spaces', '/rooms');
export const ATLAS_RATE = since(5, 12, 10);
export const DURATION = since(2, 30, 60);
export const NOTICE = 'Fjord is closed for maintenance on Friday.';
export const POPULAR = 'Most booked this week: Cobalt';
export const USER = 'ana';
export const PASSWORD = 'harbour-42';

/** An accessible name as memidex makes it an anchor's value (docs/import.md): lower
 * case, each run of characters that are not letters or digits one `-`, trimmed. */
export function slug(text: string): string {
  return text.normalize('NFKC').toLowerCase().replace(/[^\p{L}\p{N}]+/gu, '-')
    .replace(/^-+|-+$/g, '');
}

export function euros(amount: number): string {
  return `€${amount.toFixed(2)}`;
}

/** Say what a check that just held verified: `ANCHOR | CHECK | OBSERVED`. */
export function verified(anchor: string, check: string, observed: string): void {
  test.info().annotations.push({ type: 'memidex-verified',
                                 description: `${anchor} | ${check} | ${observed}` });
}

/** Name something the test depends on that its locators do not show. */
export function dependsOn(anchor: string): void {
  test.info().annotations.push({ type: 'memidex-anchor', description: anchor });
}
