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

export function SignUpPage({ onSignedIn }: { onSignedIn: () => void }) {
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const action = useAction(async () => {
    const res = await api.post<{ token: string; expiresAt: string }>('/api/merchant/register', { email, password, name });
    saveSession(res.token, res.expiresAt);
    onSignedIn();
  });
  return (
    <>
      <PageHeading title="Create your account" />
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void action.run();
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
        <ErrorMessage error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>
          Create account
        </button>
      </form>
      <p>
        Already have an account? <Link href="/signin">Sign in</Link>
      </p>
    </>
  );
}
