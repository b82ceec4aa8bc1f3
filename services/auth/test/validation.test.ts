import { checkEmail, checkInvoiceLifetimeMinutes, checkName, checkWebhookUrl, normaliseEmail, validateApiKeyCreation, validateLogin, validateNewProject, validateProjectUpdate, validateRegistration } from '../src/domain/validation';

describe('email', () => {
  test('normalisation trims and lowercases', () => {
    expect(normaliseEmail('  Ada.Lovelace@Example.COM \n')).toBe('ada.lovelace@example.com');
  });

  test.each<[unknown, string]>([
    ['ada@example.com', 'ada@example.com'],
    ['  ADA@Example.com ', 'ada@example.com'],
    ['first.last+tag@sub.example.co.uk', 'first.last+tag@sub.example.co.uk'],
    ["o'brien@example.ie", "o'brien@example.ie"],
    ['user@xn--bcher-kva.example', 'user@xn--bcher-kva.example'],
    [`${'a'.repeat(64)}@example.com`, `${'a'.repeat(64)}@example.com`],
  ])('accepts %j', (raw, normalised) => {
    expect(checkEmail(raw)).toEqual({ ok: true, value: normalised });
  });

  test.each<[unknown, string]>([
    [undefined, 'is required'],
    ['', 'is required'],
    [42, 'must be a string'],
    [['ada@example.com'], 'must be a string'],
    ['ada', 'must be a valid email address'],
    ['ada@', 'must be a valid email address'],
    ['@example.com', 'must be a valid email address'],
    ['ada@example', 'must be a valid email address'],
    ['ada@@example.com', 'must be a valid email address'],
    ['ada lovelace@example.com', 'must be a valid email address'],
    ['.ada@example.com', 'must be a valid email address'],
    ['ada..l@example.com', 'must be a valid email address'],
    ['ada@-example.com', 'must be a valid email address'],
    ['ada@example..com', 'must be a valid email address'],
    ['ada@127.0.0.1', 'must be a valid email address'],
    ['ada@example.com\n<script>', 'must be a valid email address'],
    [`${'a'.repeat(65)}@example.com`, 'must be a valid email address'],
    [`ada@${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(60)}.com`, 'must be at most 254 characters'],
  ])('refuses %j', (raw, message) => {
    expect(checkEmail(raw)).toEqual({ ok: false, message });
  });
});

describe('names', () => {
  test.each<[unknown, { ok: true; value: string } | { ok: false; message: string }]>([
    ['Acme', { ok: true, value: 'Acme' }],
    ['  Acme Ltd  ', { ok: true, value: 'Acme Ltd' }],
    ['Café ☕ 北京', { ok: true, value: 'Café ☕ 北京' }],
    ['x'.repeat(100), { ok: true, value: 'x'.repeat(100) }],
    ['😀'.repeat(100), { ok: true, value: '😀'.repeat(100) }],
    ['x'.repeat(101), { ok: false, message: 'must be at most 100 characters' }],
    ['', { ok: false, message: 'must not be empty' }],
    ['   ', { ok: false, message: 'must not be empty' }],
    [undefined, { ok: false, message: 'is required' }],
    [null, { ok: false, message: 'is required' }],
    [7, { ok: false, message: 'must be a string' }],
    ['Acme\u0000', { ok: false, message: 'must not contain control characters' }],
    ['Ac\nme', { ok: false, message: 'must not contain control characters' }],
    // Bidi overrides and isolates (issue 27): "Shop\u202Etxt.exe" would display as "Shopexe.txt".
    ...['\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u2066', '\u2067', '\u2068', '\u2069'].map((c): [unknown, { ok: false; message: string }] => [
      `Shop${c}txt.exe`,
      { ok: false, message: 'must not contain bidirectional control characters (U+202A–U+202E, U+2066–U+2069)' },
    ]),
    // Right-to-left text itself is fine.
    ['متجر שלום', { ok: true, value: 'متجر שלום' }],
  ])('%j', (raw, expected) => {
    expect(checkName(raw)).toEqual(expected);
  });
});

describe('webhook URL', () => {
  test.each([
    'https://merchant.example/webhooks/coinvoice',
    'http://localhost:3000/hook',
    'https://203.0.113.7:8443/hook?token=abc',
    'https://[2001:db8::1]/hook',
    `https://example.com/${'a'.repeat(2048 - 'https://example.com/'.length)}`,
  ])('accepts %s', (url) => {
    expect(checkWebhookUrl(url)).toEqual({ ok: true, value: url });
  });

  test.each<[unknown, string]>([
    [42, 'must be a string'],
    [undefined, 'must be a string'],
    ['ftp://example.com/hook', 'must be an http or https URL'],
    ['javascript:alert(1)', 'must be an http or https URL'],
    ['file:///etc/passwd', 'must be an http or https URL'],
    ['example.com/hook', 'must be an absolute URL'],
    ['/hook', 'must be an absolute URL'],
    ['https://', 'must be an absolute URL'],
    ['https://user:pass@example.com/hook', 'must not contain credentials'],
    ['https://user@example.com/hook', 'must not contain credentials'],
    [' https://example.com/hook', 'must not contain spaces or control characters'],
    ['https://example.com/ho ok', 'must not contain spaces or control characters'],
    ['https://example.com/hook\n', 'must not contain spaces or control characters'],
    [`https://example.com/${'a'.repeat(2049 - 'https://example.com/'.length)}`, 'must be at most 2048 characters'],
  ])('refuses %j', (raw, message) => {
    expect(checkWebhookUrl(raw)).toEqual({ ok: false, message });
  });
});

describe('invoice lifetime', () => {
  test.each<[unknown, boolean]>([
    [5, true],
    [60, true],
    [10_080, true],
    [4, false],
    [10_081, false],
    [0, false],
    [-60, false],
    [15.5, false],
    ['60', false],
    [null, false],
    [Number.NaN, false],
    [Number.POSITIVE_INFINITY, false],
  ])('%j → valid: %s', (raw, valid) => {
    expect(checkInvoiceLifetimeMinutes(raw).ok).toBe(valid);
  });
});

describe('requests report every violation under its public field name', () => {
  test('registration', () => {
    expect(validateRegistration({ email: ' Ada@Example.com', password: 'long enough', name: ' Ada ' })).toEqual({
      ok: true,
      value: { email: 'ada@example.com', password: 'long enough', name: 'Ada' },
    });
    expect(validateRegistration({ email: 'nope', password: 'short', name: '' })).toEqual({
      ok: false,
      violations: [
        { field: 'email', message: 'must be a valid email address' },
        { field: 'password', message: 'must be at least 8 characters' },
        { field: 'name', message: 'must not be empty' },
      ],
    });
    expect(validateRegistration({})).toEqual({
      ok: false,
      violations: [
        { field: 'email', message: 'is required' },
        { field: 'password', message: 'is required' },
        { field: 'name', message: 'is required' },
      ],
    });
  });

  test('registration keeps the password verbatim (no trimming)', () => {
    const result = validateRegistration({ email: 'a@b.co', password: '  spaced out  ', name: 'A' });
    expect(result).toMatchObject({ ok: true, value: { password: '  spaced out  ' } });
  });

  test('login', () => {
    expect(validateLogin({ email: 'ADA@example.com', password: 'x' })).toEqual({ ok: true, value: { email: 'ada@example.com', password: 'x' } });
    expect(validateLogin({ email: 'ada@example.com', password: 'x'.repeat(129) })).toEqual({
      ok: false,
      violations: [{ field: 'password', message: 'must be at most 128 characters' }],
    });
    expect(validateLogin({ email: 5, password: null })).toEqual({
      ok: false,
      violations: [
        { field: 'email', message: 'must be a string' },
        { field: 'password', message: 'is required' },
      ],
    });
  });

  test('new project', () => {
    expect(validateNewProject({ name: 'Shop', environment: 'sandbox' })).toEqual({ ok: true, value: { name: 'Shop', environment: 'sandbox' } });
    expect(validateNewProject({ name: 'Shop', environment: 'live', webhookUrl: 'https://shop.example/hook' })).toEqual({
      ok: true,
      value: { name: 'Shop', environment: 'live', webhookUrl: 'https://shop.example/hook' },
    });
    expect(validateNewProject({ name: 'Shop', environment: 'sandbox', webhookUrl: '' })).toEqual({
      ok: true,
      value: { name: 'Shop', environment: 'sandbox' },
    });
    expect(validateNewProject({ name: 'x'.repeat(101), environment: 'production', webhookUrl: 'ftp://x' })).toEqual({
      ok: false,
      violations: [
        { field: 'name', message: 'must be at most 100 characters' },
        { field: 'environment', message: 'must be "live" or "sandbox"' },
        { field: 'webhookUrl', message: 'must be an http or https URL' },
      ],
    });
  });

  test('project update: absent fields unchanged, empty or null webhookUrl removes it', () => {
    expect(validateProjectUpdate({})).toEqual({ ok: true, value: {} });
    expect(validateProjectUpdate({ webhookUrl: '' })).toEqual({ ok: true, value: { webhookUrl: null } });
    expect(validateProjectUpdate({ webhookUrl: null })).toEqual({ ok: true, value: { webhookUrl: null } });
    expect(validateProjectUpdate({ name: ' Renamed ', webhookUrl: 'https://a.example/h', invoiceLifetimeMinutes: 30 })).toEqual({
      ok: true,
      value: { name: 'Renamed', webhookUrl: 'https://a.example/h', invoiceLifetimeMinutes: 30 },
    });
    expect(validateProjectUpdate({ name: '', webhookUrl: 'https://u:p@a.example', invoiceLifetimeMinutes: 1 })).toEqual({
      ok: false,
      violations: [
        { field: 'name', message: 'must not be empty' },
        { field: 'webhookUrl', message: 'must not contain credentials' },
        { field: 'invoiceLifetimeMinutes', message: 'must be between 5 and 10080' },
      ],
    });
  });

  test('API key creation', () => {
    expect(validateApiKeyCreation({ name: 'server' })).toEqual({ ok: true, value: { name: 'server' } });
    expect(validateApiKeyCreation({})).toEqual({ ok: false, violations: [{ field: 'name', message: 'is required' }] });
  });
});
