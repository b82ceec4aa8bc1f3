import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Merchant } from './types';

export const AccountContext = createContext<Merchant | null>(null);

export function useAccount(): Merchant {
  const merchant = useContext(AccountContext);
  if (!merchant) throw new Error('useAccount outside a signed-in page');
  return merchant;
}

/** Tells the signed-in app that the account changed (e.g. its email was verified). */
export const AccountChangeContext = createContext<(merchant: Merchant) => void>(() => undefined);
