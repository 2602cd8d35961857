// The observing test: it asserts (almost) nothing and records what it sees, as
// `memidex-verified` annotations, on each page the suite touches. Leave it out with
// `npx playwright test --grep-invert @inventory` (or score the recordings with
// `python bench/realloop/score.py --without-inventory`).
import { test, expect, type Page } from '@playwright/test';
import { slug, verified } from './support';

/** What a page shows, read in one pass in the browser. */
interface Seen {
  links: { name: string; href: string }[];
  headings: string[];
  buttons: { name: string; disabled: boolean }[];
  fields: { label: string; type: string; value: string; checked: boolean }[];
  testids: { id: string; text: string }[];
}

const LISTS = new Set(['room-card', 'room-list', 'booking-row', 'bookings']);

async function look(page: Page): Promise<Seen> {
  return page.evaluate(() => {
    const visible = (el: Element) => (el as HTMLElement).offsetParent !== null ||
      getComputedStyle(el).position === 'fixed';
    const text = (el: Element) => (el.textContent ?? '').replace(/\s+/g, ' ').trim();
    const own = (label: Element) => Array.from(label.childNodes)
      .filter(n => n.nodeType === Node.TEXT_NODE).map(n => n.textContent).join(' ')
      .replace(/\s+/g, ' ').trim();
    return {
      links: Array.from(document.querySelectorAll('a')).filter(visible).map(a => (
        { name: text(a), href: new URL(a.href).pathname + new URL(a.href).search })),
      headings: Array.from(document.querySelectorAll('h1, h2')).filter(visible).map(text),
      buttons: Array.from(document.querySelectorAll('button')).filter(visible).map(b => (
        { name: text(b), disabled: (b as HTMLButtonElement).disabled })),
      fields: Array.from(document.querySelectorAll('input, select')).filter(visible)
        .map(el => {
          const f = el as HTMLInputElement;
          return { label: f.labels && f.labels[0] ? own(f.labels[0]) : '', type: f.type,
                   value: f.value, checked: f.checked };
        }),
      testids: Array.from(document.querySelectorAll('[data-testid]')).filter(visible)
        .map(el => ({ id: el.getAttribute('data-testid') ?? '', text: text(el) })),
    };
  });
}

function record(seen: Seen, page: Page, done: Set<string>): void {
  const once = (anchor: string, check: string, observed: string) => {
    if (!observed || done.has(anchor + check)) return;
    done.add(anchor + check);
    verified(anchor, check, observed);
  };
  for (const l of seen.links) once(`el:link:${slug(l.name)}`, 'assert-url', l.href);
  for (const h of seen.headings) once(`el:heading:${slug(h)}`, 'assert-visible', h);
  for (const b of seen.buttons) {
    once(`el:button:${slug(b.name)}`, b.disabled ? 'assert-disabled' : 'assert-enabled', b.name);
  }
  for (const f of seen.fields) {
    if (!f.label) continue;
    if (f.type === 'checkbox') {
      once(`el:field:${slug(f.label)}`, f.checked ? 'assert-checked' : 'assert-unchecked',
           f.checked ? 'checked' : 'unchecked');
    } else if (f.type.startsWith('select')) {
      once(`el:field:${slug(f.label)}`, 'assert-value', f.value);
    }
  }
  for (const t of seen.testids) {
    if (!LISTS.has(t.id)) once(`el:testid:${t.id}`, 'assert-text', t.text);
  }
  void page;
}

test('inventory of what each page shows @inventory', async ({ page }) => {
  const done = new Set<string>();
  await test.step("look at goto('/')", async () => {
    await page.goto('/');
    await expect(page.getByRole('heading', { level: 1 })).toBeVisible();
    record(await look(page), page, done);
  });
  await test.step("look at goto('/login')", async () => {
    await page.goto('/login');
    await expect(page.getByRole('heading', { level: 1 })).toBeVisible();
    record(await look(page), page, done);
  });
  await test.step("look at the page getByRole('link', { name: 'Rooms' }) leads to", async () => {
    await page.goto('/');
    await page.getByRole('link', { name: 'Rooms' }).click();
    await expect(page.getByTestId('room-card')).not.toHaveCount(0);
    const cards = await page.getByTestId('room-card').count();
    verified('el:testid:room-card', 'assert-count', String(cards));
    record(await look(page), page, done);
  });
  await test.step("look at the rooms of 8+ seats in getByLabel('Capacity')", async () => {
    await page.getByLabel('Capacity').selectOption('8');
    await expect(page.getByTestId('filter-summary')).toBeVisible();
    record(await look(page), page, done);
  });
  await test.step("look at goto('/book?room=atlas')", async () => {
    await page.goto('/book?room=atlas');
    await expect(page.getByTestId('availability')).not.toHaveText('Loading free times…');
    record(await look(page), page, done);
  });
});
