// Which failures of a dependency a request answers 503 (asStupaError): every way the MongoDB
// driver reports a lost connection, and nothing else.
import { asStupaError, Unavailable } from '../../core/errors.js';

const named = (name: string, message: string) => Object.assign(new Error(message), { name });

test('a connection lost under a bulk write is MongoDB unavailable; a bulk write refused is not', () => {
  const lost = asStupaError(named('MongoBulkWriteError', 'connection 8 to 127.0.0.1:15154 closed'));
  expect(lost).toBeInstanceOf(Unavailable);
  expect((lost as Unavailable).dependency).toBe('mongodb');
  expect(asStupaError(named('MongoNetworkError', 'connect ECONNREFUSED 127.0.0.1:1'))).toBeInstanceOf(Unavailable);
  // A duplicate key that escaped, or any other write error, is a bug (500), not an outage.
  expect(asStupaError(named('MongoBulkWriteError', 'E11000 duplicate key error collection: stupa.files'))).toBeUndefined();
});
