import { test, expect } from '@playwright/test';
import { ATLAS_RATE, DURATION, dependsOn, euros, verified } from './support';

test('the booking page and its defaults', async ({ page }) => {
  await page.goto('/book?room=atlas');
  await expect(page.getByRole('heading', { name: 'Book Atlas' })).toBeVisible();
  await expect(page.getByLabel('Duration')).toHaveValue(String(DURATION));
  verified('el:field:duration', 'assert-value', String(DURATION));
  await expect(page.getByLabel('I accept the house rules')).not.toBeChecked();
  verified('el:field:i-accept-the-house-rules', 'assert-unchecked', 'unchecked');
  await expect(page.getByRole('button', { name: 'Book' })).toBeDisabled();
  verified('el:button:book', 'assert-disabled', 'Book');
});

test('the total follows the duration', async ({ page }) => {
  const total = page.getByTestId('total');
  await test.step("goto('/book?room=atlas')", async () => {
    await page.goto('/book?room=atlas');
  });
  await test.step("read the default total in getByTestId('total')", async () => {
    const text = `Total: ${euros(ATLAS_RATE * DURATION / 60)}`;
    await expect(total).toHaveText(text);
    verified('el:testid:total', 'assert-text', text);
  });
  await test.step("choose 2 hours in getByLabel('Duration')", async () => {
    await page.getByLabel('Duration').selectOption('120');
    await expect(total).toHaveText(`Total: ${euros(ATLAS_RATE * 2)}`);
  });
});

test('shows the free times', async ({ page }) => {
  dependsOn('api:/api/availability');
  await page.goto('/book?room=atlas');
  await expect(page.getByTestId('availability')).toHaveText('4 free times');
  verified('el:testid:availability', 'assert-text', '4 free times');
  await expect(page.getByLabel('Start time')).toHaveValue('09:00');
  verified('el:field:start-time', 'assert-value', '09:00');
});

test('Book enables once the house rules are accepted', async ({ page }) => {
  dependsOn('api:/api/availability');
  await page.goto('/book?room=atlas');
  await page.getByLabel('I accept the house rules').check();
  await expect(page.getByRole('button', { name: 'Book' })).toBeEnabled();
});

test('books a room from start to finish', async ({ page }) => {
  dependsOn('api:/api/availability');
  await test.step("goto('/book?room=atlas')", async () => {
    await page.goto('/book?room=atlas');
  });
  await test.step("choose 1 hour in getByLabel('Duration')", async () => {
    await page.getByLabel('Duration').selectOption('60');
  });
  await test.step("tick getByLabel('I accept the house rules')", async () => {
    await page.getByLabel('I accept the house rules').check();
  });
  await test.step("click getByRole('button', { name: 'Book' })", async () => {
    await page.getByRole('button', { name: 'Book' }).click();
  });
  await test.step("see getByRole('status') after toHaveURL('/bookings')", async () => {
    await expect(page).toHaveURL(/\/bookings/);
    await expect(page.getByRole('status')).toHaveText('Booked Atlas at 09:00');
    verified('el:status', 'assert-text', 'Booked Atlas at 09:00');
    await expect(page.getByTestId('booking-row').last()).toContainText('Atlas at 09:00, 60 min');
  });
});
