// Where the console is: the screen and its parameters, in the URL's hash.
import type { Profile } from './api';

export interface Route {
  screen: string;
  params: URLSearchParams;
}

/** What every screen receives. */
export interface ScreenProps {
  route: Route;
  profile: Profile | null;
  refreshProfile: () => void;
}

export function readRoute(): Route {
  const [screen = '', query = ''] = location.hash.replace(/^#\/?/, '').split('?');
  return { screen: screen || 'files', params: new URLSearchParams(query) };
}

export const link = (screen: string, params: Record<string, string> = {}): string => {
  const qs = new URLSearchParams(params).toString();
  return `#/${screen}${qs ? `?${qs}` : ''}`;
};
