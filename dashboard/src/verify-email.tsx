/**
 * Shown while the account's email is unverified, only where it matters: the Projects page (where
 * a new account lands) and the API keys page of a live project (live keys need it). Never on
 * Payouts, whose own code field is the payout's: two code fields on one page were confusing.
 * Accounts signed up since issue 27 are verified by their sign-up code; this is for older ones and
 * the launcher's local developer: the emailed 6-digit code (POST /api/merchant/email/verify
 * answers the merchant, now verified), and a way to have a code sent
 * (POST /api/merchant/email/verification; the previous code stops working).
 */
import { useContext, useState } from 'preact/hooks';
import { AccountChangeContext, useAccount } from './account';
import { api } from './api';
import type { Merchant } from './types';
import { ErrorMessage, Field, useAction } from './ui';

export function VerifyEmailBanner() {
  const merchant = useAccount();
  const onVerified = useContext(AccountChangeContext);
  const [code, setCode] = useState('');
  const [resent, setResent] = useState(false);
  const verify = useAction(async () => onVerified(await api.post<Merchant>('/api/merchant/email/verify', { code: code.trim() })));
  const resend = useAction(async () => {
    setResent(false);
    verify.setError(undefined); // a refusal of the old code no longer applies to the new one
    await api.post('/api/merchant/email/verification');
    setResent(true);
  });
  if (merchant.emailVerified) return null;
  return (
    <section class="notice" aria-label="Verify your email">
      <p>
        <strong>Verify your email.</strong>{' '}
        Enter the code we sent to <strong>{merchant.email}</strong>. Live API keys and live payouts need a verified email; the sandbox works
        without.
      </p>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void verify.run();
        }}
      >
        <Field
          label="Email verification code"
          autoComplete="one-time-code"
          inputMode="numeric"
          maxLength={6}
          required
          value={code}
          onValue={setCode}
        />
        <button type="submit" class="primary" disabled={verify.busy}>
          Verify email
        </button>
        <button type="button" disabled={resend.busy} onClick={() => void resend.run()}>
          Send a new code
        </button>
      </form>
      <p role="status" aria-live="polite" class="muted">
        {resent ? 'A new code is on its way.' : ''}
      </p>
      <ErrorMessage error={verify.error ?? resend.error} />
    </section>
  );
}
