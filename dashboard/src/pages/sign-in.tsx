import { useState } from 'preact/hooks';
import { Link } from 'wouter-preact';
import { api } from '../api';
import { saveSession } from '../session';
import { ErrorMessage, Field, PageHeading, useAction } from '../ui';

export function SignInPage({ onSignedIn }: { onSignedIn: () => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const action = useAction(async () => {
    const session = await api.post<{ token: string; expiresAt: string }>('/api/merchant/login', { email, password });
    saveSession(session.token, session.expiresAt);
    onSignedIn();
  });
  return (
    <>
      <PageHeading title="Sign in" />
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void action.run();
        }}
      >
        <Field label="Email" type="email" autoComplete="email" required value={email} onValue={setEmail} />
        <Field label="Password" type="password" autoComplete="current-password" required value={password} onValue={setPassword} />
        <ErrorMessage error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>
          Sign in
        </button>
      </form>
      <p>
        New to coinvoice? <Link href="/signup">Create an account</Link>
      </p>
    </>
  );
}

/**
 * Sign-up in two steps (issue 27): the details, then the 6-digit code emailed to the address. The
 * first step answers alike for a new and a registered email (a registered one gets a note by email
 * instead of a code), so the page never says whether an address has an account.
 */
export function SignUpPage({ onSignedIn }: { onSignedIn: () => void }) {
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [pending, setPending] = useState<{ email: string; codeExpiresAt: string } | undefined>(undefined);
  const [resent, setResent] = useState(false);
  const register = useAction(async () => {
    setPending(await api.post<{ email: string; codeExpiresAt: string }>('/api/merchant/register', { email, password, name }));
  });
  const confirm = useAction(async () => {
    const res = await api.post<{ token: string; expiresAt: string }>('/api/merchant/register/confirm', { email: pending?.email ?? email, code: code.trim(), password });
    saveSession(res.token, res.expiresAt);
    onSignedIn();
  });
  const resend = useAction(async () => {
    setResent(false);
    confirm.setError(undefined); // a refusal of the old code no longer applies to the new one
    setPending(await api.post<{ email: string; codeExpiresAt: string }>('/api/merchant/register', { email, password, name }));
    setResent(true);
  });
  if (pending) {
    return (
      <>
        <PageHeading title="Check your email" />
        <p>
          We sent a 6-digit code to <strong>{pending.email}</strong>. Enter it to create your account. If this address already has an
          account, the email says so instead: <Link href="/signin">sign in</Link>.
        </p>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void confirm.run();
          }}
        >
          <Field label="Sign-up code" autoComplete="one-time-code" inputMode="numeric" maxLength={6} required value={code} onValue={setCode} />
          <ErrorMessage error={confirm.error ?? resend.error} />
          <div class="actions">
            <button type="submit" class="primary" disabled={confirm.busy}>
              Create account
            </button>
            <button type="button" disabled={resend.busy} onClick={() => void resend.run()}>
              Send a new code
            </button>
          </div>
        </form>
        <p role="status" aria-live="polite" class="muted">
          {resent ? 'A new code is on its way.' : ''}
        </p>
        <p>
          Wrong address?{' '}
          <a
            href="/signup"
            onClick={(e) => {
              e.preventDefault();
              setPending(undefined);
              setCode('');
              setResent(false);
              confirm.setError(undefined);
            }}
          >
            Change your details
          </a>
        </p>
      </>
    );
  }
  return (
    <>
      <PageHeading title="Create your account" />
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void register.run();
        }}
      >
        <Field label="Business name" autoComplete="organization" required value={name} onValue={setName} />
        <Field label="Email" type="email" autoComplete="email" required value={email} onValue={setEmail} />
        <Field
          label="Password"
          type="password"
          autoComplete="new-password"
          required
          minLength={8}
          value={password}
          onValue={setPassword}
          hint="At least 8 characters."
        />
        <ErrorMessage error={register.error} />
        <button type="submit" class="primary" disabled={register.busy}>
          Continue
        </button>
      </form>
      <p>
        Already have an account? <Link href="/signin">Sign in</Link>
      </p>
    </>
  );
}
