import { test, expect } from '@playwright/test';
import { NOTICE, ROOMS, SIGN_IN, slug, verified } from './support';

test('shows the sign-in link', async ({ page }) => {
  await page.goto('/');
  await expect(page.getByRole('heading', { name: 'Roombook' })).toBeVisible();
  verified('el:heading:roombook', 'assert-visible', 'Roombook');
  const link = page.getByRole('link', { name: SIGN_IN });
  await expect(link).toBeVisible();
  verified(`el:link:${slug(SIGN_IN)}`, 'assert-visible', SIGN_IN);
});

test('shows the notice', async ({ page }) => {
  await page.goto('/');
  await expect(page.getByTestId('notice')).toHaveText(NOTICE);
  verified('el:testid:notice', 'assert-text', NOTICE);
});

test('the rooms link leads to the rooms page', async ({ page }) => {
  await test.step("goto('/')", async () => {
    await page.goto('/');
  });
  await test.step("click getByRole('link', { name: 'Rooms' })", async () => {
    await page.getByRole('link', { name: 'Rooms' }).click();
    await expect(page).toHaveURL(ROOMS);
    verified('el:link:rooms', 'assert-url', ROOMS);
  });
  await test.step("see getByRole('heading', { name: 'Meeting rooms' })", async () => {
    await expect(page.getByRole('heading', { name: 'Meeting rooms' })).toBeVisible();
    verified('el:heading:meeting-rooms', 'assert-visible', 'Meeting rooms');
  });
});
