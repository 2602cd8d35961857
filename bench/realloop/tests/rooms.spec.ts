import { test, expect } from '@playwright/test';
import { ATLAS_RATE, POPULAR, ROOMS, verified } from './support';

test('lists every room', async ({ page }) => {
  await page.goto(ROOMS);
  await expect(page.getByTestId('room-card')).toHaveCount(6);
  verified('el:testid:room-card', 'assert-count', '6');
  await expect(page.getByTestId('room-count')).toHaveText('6 rooms');
  verified('el:testid:room-count', 'assert-text', '6 rooms');
  await expect(page.getByLabel('Capacity')).toHaveValue('any');
  verified('el:field:capacity', 'assert-value', 'any');
});

test('the capacity filter keeps rooms of 8 seats or more', async ({ page }) => {
  await test.step(`goto('${ROOMS}')`, async () => {
    await page.goto(ROOMS);
    await expect(page.getByTestId('room-card')).toHaveCount(6);
  });
  await test.step("choose 8+ seats in getByLabel('Capacity')", async () => {
    await page.getByLabel('Capacity').selectOption('8');
  });
  await test.step("see three rooms in getByTestId('room-card')", async () => {
    await expect(page.getByTestId('room-card')).toHaveCount(3);
    await expect(page.getByTestId('room-list')).toContainText('Borealis');
    await expect(page.getByTestId('filter-summary')).toHaveText('3 rooms with 8+ seats');
    verified('el:testid:filter-summary', 'assert-text', '3 rooms with 8+ seats');
  });
});

test('shows the price of each room', async ({ page }) => {
  await page.goto(ROOMS);
  await expect(page.getByTestId('price-atlas')).toHaveText(`€${ATLAS_RATE} / hour`);
  verified('el:testid:price-atlas', 'assert-text', `€${ATLAS_RATE} / hour`);
  await expect(page.getByTestId('price-cobalt')).toHaveText('€25 / hour');
  verified('el:testid:price-cobalt', 'assert-text', '€25 / hour');
});

test('shows the most booked room', async ({ page }) => {
  await page.goto(ROOMS);
  await expect(page.getByTestId('popular')).toHaveText(POPULAR);
  verified('el:testid:popular', 'assert-text', POPULAR);
});
