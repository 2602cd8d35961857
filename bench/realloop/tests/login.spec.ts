import { test, expect } from '@playwright/test';
import { PASSWORD, SIGN_IN, USER, since, slug, verified } from './support';

test('the login form and its defaults', async ({ page }) => {
  await page.goto('/login');
  await expect(page.getByRole('heading', { name: SIGN_IN })).toBeVisible();
  const remember = page.getByLabel('Remember me');
  if (since(2, true, false)) {
    await expect(remember).toBeChecked();
    verified('el:field:remember-me', 'assert-checked', 'checked');
  } else {
    await expect(remember).not.toBeChecked();
    verified('el:field:remember-me', 'assert-unchecked', 'unchecked');
  }
  const button = page.getByRole('button', { name: SIGN_IN });
  await expect(button).toBeEnabled();
  verified(`el:button:${slug(SIGN_IN)}`, 'assert-enabled', SIGN_IN);
});

test('signs in and sees my bookings', async ({ page }) => {
  await test.step("goto('/login')", async () => {
    await page.goto('/login');
  });
  await test.step("fill getByLabel('Username') and getByLabel('Password')", async () => {
    await page.getByLabel('Username').fill(USER);
    await page.getByLabel('Password').fill(PASSWORD);
  });
  await test.step(`click getByRole('button', { name: '${SIGN_IN}' })`, async () => {
    await page.getByRole('button', { name: SIGN_IN }).click();
  });
  await test.step("see getByTestId('signed-in-as') after toHaveURL('/bookings')", async () => {
    await expect(page).toHaveURL('/bookings');
    await expect(page.getByTestId('signed-in-as')).toHaveText(`Signed in as ${USER}`);
    verified('el:testid:signed-in-as', 'assert-text', `Signed in as ${USER}`);
  });
});

test('a wrong password shows an error', async ({ page }) => {
  await page.goto('/login');
  await page.getByLabel('Username').fill(USER);
  await page.getByLabel('Password').fill('not-the-password');
  await page.getByRole('button', { name: SIGN_IN }).click();
  await expect(page.getByRole('alert')).toHaveText('Wrong username or password');
  verified('el:alert', 'assert-text', 'Wrong username or password');
  await expect(page).toHaveURL('/login');
});
