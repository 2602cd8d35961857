import { test, expect } from '@playwright/test';
import { verified } from './support';

test('the availability API answers', async ({ request }) => {
  const res = await request.get('/api/availability?room=atlas');
  await expect(res).toBeOK();
  verified('api:/api/availability', 'assert-status', String(res.status()));
  expect((await res.json()).free).toHaveLength(4);
});

test('the rooms API filters by capacity', async ({ request }) => {
  const res = await request.get('/api/rooms?min=8');
  await expect(res).toBeOK();
  const names = (await res.json()).map((r: { name: string }) => r.name);
  expect(names).toEqual(['Borealis', 'Cobalt', 'Fjord']);
  verified('api:/api/rooms?min=8', 'assert-count', String(names.length));
});

test('the bookings API refuses an unknown time', async ({ request }) => {
  const res = await request.post('/api/bookings', { data: { room: 'atlas', start: '08:00' } });
  expect(res.status()).toBe(400);
  verified('api:/api/bookings', 'assert-status', '400');
});
