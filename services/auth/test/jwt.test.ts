import { createHmac, createPrivateKey, generateKeyPairSync, sign } from 'node:crypto';
import { DEFAULT_CLOCK_SKEW_SECONDS, SigningKeys, generateSigningKey, importJwks, publicJwkOf, signSessionToken, signingKeyFromPem, signingKeyToPem, verifyJwt, type SessionSubject, type SigningKey } from '@coinvoice/domain/credentials/jwt';

const NOW = new Date('2030-01-01T12:00:00Z');
const NOW_SECONDS = NOW.getTime() / 1000;
const TTL = 3600;
const merchant: SessionSubject = { merchantId: 'f5c3c0de-8a4b-4c1e-9d0a-2b7e6f1a9c33', email: 'ada@example.com', admin: false, sessionEpoch: 0 };

function base64UrlJson(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** A compact JWS over arbitrary header and payload, signed with `key` (for hostile-token tests). */
function signRaw(key: SigningKey, header: object, payload: object): string {
  const input = `${base64UrlJson(header)}.${base64UrlJson(payload)}`;
  return `${input}.${sign(null, Buffer.from(input), key.privateKey).toString('base64url')}`;
}

function validPayload(overrides: object = {}): object {
  return {
    sub: merchant.merchantId,
    email: merchant.email,
    sv: 0,
    iat: NOW_SECONDS,
    exp: NOW_SECONDS + TTL,
    iss: 'coinvoice',
    aud: 'coinvoice-dashboard',
    ...overrides,
  };
}

describe('signing and verifying session tokens', () => {
  const keys = SigningKeys.generate();
  const jwks = importJwks(keys.toJwks());

  test('a signed token verifies and carries the claims', async () => {
    const issued = await keys.sign(merchant, { now: NOW, ttlSeconds: TTL });
    expect(issued.expiresAt).toEqual(new Date(NOW.getTime() + TTL * 1000));
    const [header] = issued.token.split('.');
    expect(JSON.parse(Buffer.from(header ?? '', 'base64url').toString())).toEqual({ alg: 'EdDSA', typ: 'JWT', kid: keys.current.kid });

    const verified = await verifyJwt(issued.token, jwks, NOW);
    expect(verified).toEqual({
      valid: true,
      claims: {
        sub: merchant.merchantId,
        email: merchant.email,
        sv: 0,
        iat: NOW_SECONDS,
        exp: NOW_SECONDS + TTL,
        iss: 'coinvoice',
        aud: 'coinvoice-dashboard',
      },
    });
  });

  test('the admin claim is present only for admins', async () => {
    const admin = await keys.sign({ ...merchant, admin: true }, { now: NOW, ttlSeconds: TTL });
    expect(admin.claims.admin).toBe(true);
    expect(await verifyJwt(admin.token, jwks, NOW)).toMatchObject({ valid: true, claims: { admin: true } });
    const plain = await keys.sign(merchant, { now: NOW, ttlSeconds: TTL });
    expect('admin' in plain.claims).toBe(false);
  });

  test('tokens are byte for byte those issued before jose signed them, so sessions issued then stay valid', async () => {
    // What the hand-written signer produced: header {alg, typ, kid}, the claims in this order,
    // Ed25519 over "header.payload" (deterministic, so the same input gives the same token).
    const before = signRaw(keys.current, { alg: 'EdDSA', typ: 'JWT', kid: keys.current.kid }, validPayload());
    expect((await keys.sign(merchant, { now: NOW, ttlSeconds: TTL })).token).toBe(before);
    const laterEpoch = signRaw(keys.current, { alg: 'EdDSA', typ: 'JWT', kid: keys.current.kid }, { ...validPayload(), sv: 3 });
    expect(await verifyJwt(laterEpoch, jwks, NOW)).toMatchObject({ valid: true, claims: { sv: 3 } });
  });

  test('a token signed by another key is refused', async () => {
    const stranger = SigningKeys.generate();
    const foreign = await stranger.sign(merchant, { now: NOW, ttlSeconds: TTL });
    expect(await verifyJwt(foreign.token, jwks, NOW)).toEqual({ valid: false, reason: 'unknown_key' });

    // Same kid as ours but another private key: the signature does not verify.
    const impostor: SigningKey = { ...stranger.current, kid: keys.current.kid };
    const forged = await signSessionToken(impostor, merchant, { now: NOW, ttlSeconds: TTL });
    expect(await verifyJwt(forged.token, jwks, NOW)).toEqual({ valid: false, reason: 'bad_signature' });
  });

  test('expiry allows only the clock skew', async () => {
    const { token } = await keys.sign(merchant, { now: NOW, ttlSeconds: TTL });
    const at = (secondsAfterIssue: number) => new Date(NOW.getTime() + secondsAfterIssue * 1000);
    expect(await verifyJwt(token, jwks, at(TTL - 1))).toMatchObject({ valid: true });
    expect(await verifyJwt(token, jwks, at(TTL + DEFAULT_CLOCK_SKEW_SECONDS - 1))).toMatchObject({ valid: true });
    expect(await verifyJwt(token, jwks, at(TTL + DEFAULT_CLOCK_SKEW_SECONDS))).toEqual({ valid: false, reason: 'expired' });
    expect(await verifyJwt(token, jwks, at(TTL + 86_400))).toEqual({ valid: false, reason: 'expired' });
    expect(await verifyJwt(token, jwks, at(TTL), 0)).toEqual({ valid: false, reason: 'expired' });
  });

  test('a token issued in the future (beyond the skew) is not yet valid', async () => {
    const { token } = await keys.sign(merchant, { now: new Date(NOW.getTime() + 10 * 60_000), ttlSeconds: TTL });
    expect(await verifyJwt(token, jwks, NOW)).toEqual({ valid: false, reason: 'not_yet_valid' });
    const slightlyAhead = await keys.sign(merchant, { now: new Date(NOW.getTime() + 5_000), ttlSeconds: TTL });
    expect(await verifyJwt(slightlyAhead.token, jwks, NOW)).toMatchObject({ valid: true });
    const withNbf = signRaw(keys.current, { alg: 'EdDSA', kid: keys.current.kid }, validPayload({ nbf: NOW_SECONDS + 600 }));
    expect(await verifyJwt(withNbf, jwks, NOW)).toEqual({ valid: false, reason: 'not_yet_valid' });
  });

  test('alg "none" is refused in every spelling', async () => {
    for (const alg of ['none', 'None', 'NONE', 'nOnE']) {
      for (const signature of ['', 'AAAA']) {
        const token = `${base64UrlJson({ alg, typ: 'JWT', kid: keys.current.kid })}.${base64UrlJson(validPayload())}.${signature}`;
        expect(await verifyJwt(token, jwks, NOW)).toEqual({ valid: false, reason: 'unsupported_algorithm' });
      }
    }
  });

  test('HS256 with the public key as the HMAC secret is refused (algorithm confusion)', async () => {
    const publicX = keys.toJwks().keys[0]?.x ?? '';
    const input = `${base64UrlJson({ alg: 'HS256', typ: 'JWT', kid: keys.current.kid })}.${base64UrlJson(validPayload())}`;
    for (const secret of [publicX, Buffer.from(publicX, 'base64url')]) {
      const token = `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
      expect(await verifyJwt(token, jwks, NOW)).toEqual({ valid: false, reason: 'unsupported_algorithm' });
    }
  });

  test('other algorithms, a missing alg and a crit header are refused', async () => {
    for (const header of [
      { alg: 'ES256', kid: keys.current.kid },
      { alg: 'RS256', kid: keys.current.kid },
      { alg: 'Ed25519', kid: keys.current.kid },
      { kid: keys.current.kid },
      { alg: 'EdDSA', kid: keys.current.kid, crit: ['exp'] },
    ]) {
      expect(await verifyJwt(signRaw(keys.current, header, validPayload()), jwks, NOW)).toEqual({
        valid: false,
        reason: 'unsupported_algorithm',
      });
    }
  });

  test('a tampered payload or signature is refused', async () => {
    const { token } = await keys.sign(merchant, { now: NOW, ttlSeconds: TTL });
    const [header = '', , signature = ''] = token.split('.');
    const elevated = base64UrlJson(validPayload({ admin: true }));
    expect(await verifyJwt(`${header}.${elevated}.${signature}`, jwks, NOW)).toEqual({ valid: false, reason: 'bad_signature' });
    const otherMerchant = base64UrlJson(validPayload({ sub: 'someone-else' }));
    expect(await verifyJwt(`${header}.${otherMerchant}.${signature}`, jwks, NOW)).toEqual({ valid: false, reason: 'bad_signature' });

    const flipped = Buffer.from(signature, 'base64url');
    flipped[0] = (flipped[0] ?? 0) ^ 1;
    expect(await verifyJwt(`${token.split('.').slice(0, 2).join('.')}.${flipped.toString('base64url')}`, jwks, NOW)).toEqual({
      valid: false,
      reason: 'bad_signature',
    });
  });

  test('wrong issuer or audience is refused even when properly signed', async () => {
    const header = { alg: 'EdDSA', typ: 'JWT', kid: keys.current.kid };
    expect(await verifyJwt(signRaw(keys.current, header, validPayload({ iss: 'someone' })), jwks, NOW)).toEqual({
      valid: false,
      reason: 'wrong_issuer',
    });
    expect(await verifyJwt(signRaw(keys.current, header, validPayload({ aud: 'coinvoice-checkout' })), jwks, NOW)).toEqual({
      valid: false,
      reason: 'wrong_audience',
    });
    expect(await verifyJwt(signRaw(keys.current, header, validPayload({ aud: ['other', 'coinvoice-dashboard'] })), jwks, NOW)).toMatchObject({
      valid: true,
    });
  });

  test('signed payloads with claims of the wrong type are malformed', async () => {
    const header = { alg: 'EdDSA', kid: keys.current.kid };
    for (const overrides of [{ sub: 42 }, { sub: '' }, { email: null }, { exp: '2030' }, { iat: 1.5 }, { admin: 'yes' }]) {
      expect(await verifyJwt(signRaw(keys.current, header, validPayload(overrides)), jwks, NOW)).toEqual({ valid: false, reason: 'malformed' });
    }
  });

  test('malformed tokens are refused without throwing', async () => {
    const { token } = await keys.sign(merchant, { now: NOW, ttlSeconds: TTL });
    const [header = '', payload = '', signature = ''] = token.split('.');
    const cases: unknown[] = [
      undefined,
      null,
      42,
      '',
      'abc',
      `${header}.${payload}`,
      `${token}.extra`,
      `${header}=.${payload}.${signature}`,
      `${header}.${payload}.${signature}==`,
      `${header}.${payload}.${signature.slice(0, -2)}`,
      `%%%.${payload}.${signature}`,
      `${base64UrlJson(['EdDSA'])}.${payload}.${signature}`,
      `${Buffer.from('not json').toString('base64url')}.${payload}.${signature}`,
      `${header}.${payload}.${signature}`.replace(/\./g, '..'),
      'x'.repeat(10_000),
    ];
    for (const candidate of cases) {
      expect(await verifyJwt(candidate, jwks, NOW)).toMatchObject({ valid: false });
    }
    expect(await verifyJwt(`${header}.${payload}.${signature.slice(0, -2)}`, jwks, NOW)).toEqual({ valid: false, reason: 'malformed' });
  });

  test('a header without kid, or with an unknown kid, is refused', async () => {
    expect(await verifyJwt(signRaw(keys.current, { alg: 'EdDSA' }, validPayload()), jwks, NOW)).toEqual({ valid: false, reason: 'unknown_key' });
    expect(await verifyJwt(signRaw(keys.current, { alg: 'EdDSA', kid: 'nope' }, validPayload()), jwks, NOW)).toEqual({
      valid: false,
      reason: 'unknown_key',
    });
  });
});

describe('key rotation', () => {
  test('a token signed before rotation stays valid against a JWKS holding both keys, until it expires', async () => {
    const before = SigningKeys.generate();
    const oldToken = await before.sign(merchant, { now: NOW, ttlSeconds: TTL });

    const after = before.rotate();
    expect(after.current.kid).not.toBe(before.current.kid);
    const jwks = after.toJwks();
    expect(jwks.keys.map((key) => key.kid)).toEqual([after.current.kid, before.current.kid]);

    const newToken = await after.sign(merchant, { now: NOW, ttlSeconds: TTL });
    const kidOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[0] ?? '', 'base64url').toString()).kid;
    expect(kidOf(newToken.token)).toBe(after.current.kid);
    expect(kidOf(oldToken.token)).toBe(before.current.kid);

    const keys = importJwks(jwks);
    expect(await verifyJwt(oldToken.token, keys, NOW)).toMatchObject({ valid: true });
    expect(await verifyJwt(newToken.token, keys, NOW)).toMatchObject({ valid: true });
    expect(await verifyJwt(oldToken.token, keys, new Date(oldToken.expiresAt.getTime() + 3_600_000))).toEqual({
      valid: false,
      reason: 'expired',
    });

    // Once the old key is dropped from the JWKS its tokens are refused; the new key's tokens are not.
    const pruned = importJwks(after.withoutKey(before.current.kid).toJwks());
    expect(await verifyJwt(oldToken.token, pruned, NOW)).toEqual({ valid: false, reason: 'unknown_key' });
    expect(await verifyJwt(newToken.token, pruned, NOW)).toMatchObject({ valid: true });
    expect(() => after.withoutKey(after.current.kid)).toThrow();
  });
});

describe('keys and JWKS', () => {
  test('the JWKS is RFC 8037 shaped and survives JSON', async () => {
    const keys = SigningKeys.generate();
    const document = JSON.parse(JSON.stringify(keys.toJwks()));
    expect(document).toEqual({
      keys: [{ kty: 'OKP', crv: 'Ed25519', x: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), kid: keys.current.kid, alg: 'EdDSA', use: 'sig' }],
    });
    expect(document.keys[0]).not.toHaveProperty('d');
    expect(importJwks(document).has(keys.current.kid)).toBe(true);
  });

  test('importJwks skips foreign keys and refuses what is not a JWKS', async () => {
    const ours = publicJwkOf(generateSigningKey());
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'jwk' });
    const imported = importJwks({
      keys: [
        { ...rsa, kid: 'rsa' },
        { ...ours, kid: 'enc', use: 'enc' },
        { ...ours, kid: 'hs', alg: 'HS256' },
        { ...ours, kid: 'short', x: 'AAAA' },
        { kty: 'oct', k: 'c2VjcmV0', kid: 'oct' },
        'junk',
        ours,
      ],
    });
    expect([...imported.keys()]).toEqual([ours.kid]);
    for (const bad of [null, [], {}, { keys: 'x' }, 'jwks']) {
      expect(() => importJwks(bad)).toThrow(/not a JWKS/);
    }
  });

  test('private keys round-trip through PKCS#8 PEM with the same kid', async () => {
    const key = generateSigningKey();
    const pem = signingKeyToPem(key);
    expect(pem).toMatch(/^-----BEGIN PRIVATE KEY-----\n[\s\S]+\n-----END PRIVATE KEY-----\n$/);
    const restored = signingKeyFromPem(pem);
    expect(restored.kid).toBe(key.kid);
    const { token } = await signSessionToken(restored, merchant, { now: NOW, ttlSeconds: TTL });
    expect(await verifyJwt(token, importJwks({ keys: [publicJwkOf(key)] }), NOW)).toMatchObject({ valid: true });
  });

  test('a non-Ed25519 PEM is refused', async () => {
    const rsaPem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    expect(() => signingKeyFromPem(rsaPem)).toThrow(/Ed25519/);
  });

  test('the kid is the RFC 7638 thumbprint (RFC 8037 appendix A.3 vector)', async () => {
    const rfcKey = createPrivateKey({
      key: { kty: 'OKP', crv: 'Ed25519', d: 'nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' },
      format: 'jwk',
    });
    const key = signingKeyFromPem(rfcKey.export({ type: 'pkcs8', format: 'pem' }).toString());
    expect(key.kid).toBe('kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k');
    expect(publicJwkOf(key).x).toBe('11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo');
  });

  test('signing refuses a non-positive lifetime', async () => {
    await expect(SigningKeys.generate().sign(merchant, { now: NOW, ttlSeconds: 0 })).rejects.toThrow(RangeError);
  });
});
