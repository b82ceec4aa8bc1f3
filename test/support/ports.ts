/** A TCP port that was free a moment ago, for a process a test starts itself (the launcher's own). */
export { freePort as freePortForTest } from '../../deploy/local/src/system';
