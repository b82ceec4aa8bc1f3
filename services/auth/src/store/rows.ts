/** Row shapes of the auth schema as postgres.js returns them (uuid → string, timestamptz → Date). */
import type { ProjectEnvironment } from '@coinvoice/domain/environment';

export interface MerchantRow {
  id: string;
  email: string;
  name: string;
  created_at: Date;
  is_operator: boolean;
  email_verified_at: Date | null;
  session_epoch: number;
}

/** The pending email verification code of a merchant (its hash and salt, never the code). */
export interface EmailCodeRow {
  id: string;
  email_verified_at: Date | null;
  email_code_hash: Buffer | null;
  email_code_salt: Buffer | null;
  email_code_expires_at: Date | null;
  email_code_attempts_left: number;
}

/** A merchant with the password hash: only Login reads it. */
export interface MerchantCredentialsRow extends MerchantRow {
  password_hash: string;
}

export interface SigningKeyRow {
  kid: string;
  private_key_pem: string;
  created_at: Date;
  retired_at: Date | null;
}

/** A project as the merchant sees it: never carries the webhook secret. */
export interface ProjectRow {
  id: string;
  merchant_id: string;
  name: string;
  environment: ProjectEnvironment;
  webhook_url: string | null;
  invoice_lifetime_minutes: number;
  /** numeric(4,2) as a decimal string. */
  payment_tolerance_percent: string;
  /** Until when the last of the replaced secrets in force signs (docs/webhook-delivery.md#secret-rotation); null when none is. */
  previous_webhook_secret_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** Everything other services need about a project (GetProjectContext), secret included. */
export interface ProjectContextRow extends ProjectRow {
  webhook_secret: string;
  /** The replaced secrets in force, opened; the one ending last first. */
  previous_webhook_secrets: Array<{ secret: string; expires_at: Date }>;
  merchant_email: string;
  merchant_email_verified: boolean;
}

export interface ApiKeyRow {
  id: string;
  project_id: string;
  name: string;
  display_prefix: string;
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

/** What VerifyApiKey needs: the key's state and its project. */
export interface ApiKeyVerificationRow {
  key_id: string;
  revoked_at: Date | null;
  last_used_at: Date | null;
  project_id: string;
  project_name: string;
  environment: ProjectEnvironment;
  merchant_id: string;
  invoice_lifetime_minutes: number;
  payment_tolerance_percent: string;
}
